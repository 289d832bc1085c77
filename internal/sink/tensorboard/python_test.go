package tensorboard

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// The independent check: Debian's protoc generates Python classes from testdata/tfevent.proto
// (TensorFlow's field numbers, written down apart from event.go), and testdata/read_events.py
// checks every CRC with the crc32c module and decodes every record with the protobuf runtime.
// Needs the Debian packages protobuf-compiler, python3-protobuf and python3-crc32c.

// pythonReader returns a python3 that imports google.protobuf and crc32c and the directory of
// the generated classes, or skips the test (fails it under CI=true) when there is none.
func pythonReader(t *testing.T) (python, pbDir string) {
	t.Helper()
	missing := func(what string) {
		msg := "independent TensorBoard reader unavailable: " + what +
			"; install it with: apt-get install -y protobuf-compiler python3-protobuf python3-crc32c"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, NOT VERIFIED: " + msg)
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		missing("protoc not found")
	}
	// The Debian interpreter first: a python3 earlier on PATH (a virtualenv, pyenv) may lack
	// the Debian modules.
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import google.protobuf, crc32c").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		missing("no python3 imports google.protobuf and crc32c")
	}
	pbDir = t.TempDir()
	out, err := exec.Command(protoc, "--proto_path=testdata", "--python_out="+pbDir, "tfevent.proto").CombinedOutput()
	if err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	return python, pbDir
}

type pyValue struct {
	Tag    string `json:"tag"`
	Simple string `json:"simple_value"`
	Plugin string `json:"plugin"`
	Image  *struct {
		Height     int    `json:"height"`
		Width      int    `json:"width"`
		Colorspace int    `json:"colorspace"`
		SHA256     string `json:"sha256"`
	} `json:"image"`
}

type pyEvent struct {
	WallTime    string    `json:"wall_time"`
	Step        int64     `json:"step"`
	FileVersion string    `json:"file_version"`
	Values      []pyValue `json:"values"`
}

func pythonRead(t *testing.T, path string) []pyEvent {
	t.Helper()
	python, pbDir := pythonReader(t)
	cmd := exec.Command(python, "testdata/read_events.py", pbDir, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_events.py %s: %v\n%s", path, err, stderr.Bytes())
	}
	var evs []pyEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev pyEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("read_events.py printed %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func pyFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("python float %q: %v", s, err)
	}
	return f
}

func TestPythonReadsTensorFlowFile(t *testing.T) {
	evs := pythonRead(t, "testdata/events.out.tfevents.1687811641.v2")
	if len(evs) != 2 || evs[0].FileVersion != "brain.Event:2" || len(evs[1].Values) != 1 ||
		evs[1].Values[0].Tag != "hello" || pyFloat(t, evs[1].Values[0].Simple) != 1 {
		t.Errorf("python read %+v", evs)
	}
}

// TestPythonReadsWrittenFile compares, exactly, what the independent reader decodes with the
// steps written: step, wall time to the bit, every tag in order, every value at float32
// precision (simple_value is a float), and every image's size, colorspace and bytes.
func TestPythonReadsWrittenFile(t *testing.T) {
	for _, tt := range []struct {
		name, settings    string
		perWorker, images bool
	}{
		{"defaults", "tensorboard", false, true},
		{"per worker", "{type: tensorboard, per_worker: true}", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			rs := testRecords(5, testPlots(t, out))
			evs := pythonRead(t, writeAll(t, out, tt.settings, rs))
			if len(evs) != len(rs)+1 {
				t.Fatalf("python read %d events, want %d", len(evs), len(rs)+1)
			}
			if evs[0].FileVersion != fileVersion || pyFloat(t, evs[0].WallTime) != wallTime(t0) {
				t.Errorf("first event %+v", evs[0])
			}
			for i, r := range rs {
				ev := evs[i+1]
				if ev.Step != r.Step || pyFloat(t, ev.WallTime) != wallTime(r.End) {
					t.Errorf("event %d: step %d at %s, want step %d at %v", i+1, ev.Step, ev.WallTime, r.Step, wallTime(r.End))
				}
				e := expect(t, out, r, tt.perWorker, tt.images)
				var scalars, images []pyValue
				for _, v := range ev.Values {
					if v.Image != nil {
						images = append(images, v)
					} else {
						scalars = append(scalars, v)
					}
				}
				if len(scalars) != len(e.tags) || len(images) != len(e.pics) {
					t.Fatalf("step %d: %d scalars and %d images, want %d and %d", r.Step, len(scalars), len(images), len(e.tags), len(e.pics))
				}
				for j, v := range scalars {
					// Python widens the float32 to a double exactly, as float64() does.
					got, want := pyFloat(t, v.Simple), float64(e.values[j])
					if v.Tag != e.tags[j] || !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
						t.Errorf("step %d: %s = %s, want %s = %v", r.Step, v.Tag, v.Simple, e.tags[j], e.values[j])
					}
				}
				for j, v := range images {
					b, err := os.ReadFile(filepath.Join(out, r.Plots[j]))
					if err != nil {
						t.Fatal(err)
					}
					sum := sha256.Sum256(b)
					pic, _ := pngPicture("", b)
					if v.Tag != e.pics[j] || v.Image.Width != e.picDims[j][0] || v.Image.Height != e.picDims[j][1] ||
						v.Image.SHA256 != hex.EncodeToString(sum[:]) || v.Image.Colorspace != pic.colorspace {
						t.Errorf("step %d: image %+v %+v, want %s %v", r.Step, v, *v.Image, e.pics[j], e.picDims[j])
					}
				}
			}
		})
	}
}

func TestColorspace(t *testing.T) {
	out := t.TempDir()
	want := map[string]int{"gray": 1, "kv_cache_usage_perc": 3, "rgba": 4, "palette": 3}
	for _, p := range testPlots(t, out) {
		b, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		pic, err := pngPicture(plotTag(p), b)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[pic.tag[len("plots/"):]]; pic.colorspace != w {
			t.Errorf("%s: colorspace %d, want %d", p, pic.colorspace, w)
		}
	}
}

// readSteps parses a steps.jsonl, one record a line.
func readSteps(t *testing.T, path string) []*step.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*step.Record
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		r := &step.Record{}
		if err := json.Unmarshal(line, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestPythonReadsStepsJSONL writes the records of a real run's steps.jsonl (vllmstat run against
// the simulated fleet: two servers of two engines, per-worker records on) and checks that the
// independent reader decodes exactly them.
func TestPythonReadsStepsJSONL(t *testing.T) {
	out := t.TempDir()
	rs := readSteps(t, testkit.Fixture(t, "steps.jsonl"))
	evs := pythonRead(t, writeAll(t, out, "{type: tensorboard, per_worker: true}", rs))
	if len(evs) != len(rs)+1 {
		t.Fatalf("python read %d events, want %d", len(evs), len(rs)+1)
	}
	n := 0
	for i, r := range rs {
		ev := evs[i+1]
		e := expect(t, out, r, true, true)
		if ev.Step != r.Step || pyFloat(t, ev.WallTime) != wallTime(r.End) || len(ev.Values) != len(e.tags) {
			t.Fatalf("event %d: step %d at %s with %d values, want step %d with %d", i+1, ev.Step, ev.WallTime, len(ev.Values), r.Step, len(e.tags))
		}
		for j, v := range ev.Values {
			if got, want := pyFloat(t, v.Simple), float64(e.values[j]); v.Tag != e.tags[j] || got != want {
				t.Errorf("step %d: %s = %s, want %s = %v", r.Step, v.Tag, v.Simple, e.tags[j], want)
			}
			n++
		}
	}
	t.Logf("%d steps, %d scalars compared", len(rs), n)
}
