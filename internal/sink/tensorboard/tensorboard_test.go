package tensorboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

var t0 = time.Date(2025, 7, 1, 12, 0, 0, 123456789, time.UTC)

// testPlots writes PNGs of each colour kind under outDir/plots and returns their paths
// relative to outDir, as the plot stage sets Record.Plots.
func testPlots(t *testing.T, outDir string) []string {
	t.Helper()
	gray := image.NewGray(image.Rect(0, 0, 7, 5))
	rgb := image.NewNRGBA(image.Rect(0, 0, 40, 30))
	rgba := image.NewNRGBA(image.Rect(0, 0, 3, 9))
	for i := range rgb.Pix {
		rgb.Pix[i] = 0xff
		rgba.Pix[i%len(rgba.Pix)] = byte(i)
	}
	pal := image.NewPaletted(image.Rect(0, 0, 4, 4), color.Palette{color.Black, color.White})
	var rel []string
	for name, img := range map[string]image.Image{"gray": gray, "kv_cache_usage_perc": rgb, "rgba": rgba, "palette": pal} {
		p := filepath.Join("plots", "step_000001", name+".png")
		if err := os.MkdirAll(filepath.Join(outDir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outDir, p), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		rel = append(rel, p)
	}
	slices.Sort(rel)
	return rel
}

// testRecords makes n steps whose values cover what float32 keeps and loses.
func testRecords(n int, plots []string) []*step.Record {
	var rs []*step.Record
	for i := range n {
		start := t0.Add(time.Duration(i) * 30 * time.Second)
		r := &step.Record{
			Step: int64(i), Start: start, End: start.Add(30*time.Second + time.Duration(i)*time.Microsecond),
			DurationS: 30, Workers: 2,
			Metrics: map[string]float64{
				"vllm/prefix_cache_hit_rate":     0.1 * float64(i),
				"vllm/generation_tokens":         12345678.9 + float64(i),
				"vllm/kv_cache_usage_perc/p95":   1e-9 * float64(i+1),
				"vllm/num_preemptions":           0,
				"vllm/negative":                  -1.5,
				"vllm/huge":                      math.MaxFloat64,
				"vllm/nan":                       math.NaN(),
				"vllm/e2e_request_latency_s/p99": float64(i) / 3,
				"vllm/unicode/µs":                42,
			},
			PerWorker: []step.WorkerRecord{
				{Target: "http://10.0.0.7:8000/metrics", Engine: "0", Metrics: map[string]float64{"vllm/num_preemptions": float64(i)}},
				{Target: "https://gpu-3.internal:9000/vllm/metrics", Metrics: map[string]float64{"vllm/num_preemptions": 2}},
			},
		}
		if i == 1 {
			r.Plots = plots
		}
		rs = append(rs, r)
	}
	return rs
}

// writeAll writes rs through a new Writer and returns the event file.
func writeAll(t *testing.T, outDir, settings string, rs []*step.Record) string {
	t.Helper()
	w, err := open(outDir, sinkspec.Parse(t, "sinks[1]", settings), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := w.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// expected is what a reader must find for r: scalar tags in order with their float32 values,
// then the plots.
type expected struct {
	tags    []string
	values  []float32
	pics    []string
	picDims [][3]int
}

func expect(t *testing.T, outDir string, r *step.Record, perWorker, images bool) expected {
	var e expected
	m := r.Scalars("vllm")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e.tags = append(e.tags, k)
		e.values = append(e.values, float32(m[k]))
	}
	if perWorker {
		for _, w := range r.PerWorker {
			for _, k := range slices.Sorted(maps.Keys(w.Metrics)) {
				e.tags = append(e.tags, sink.WorkerKey(k, w.Target, w.Engine, w.Labels))
				e.values = append(e.values, float32(w.Metrics[k]))
			}
		}
	}
	if images {
		for _, p := range r.Plots {
			b, err := os.ReadFile(filepath.Join(outDir, p))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			e.pics = append(e.pics, plotTag(p))
			e.picDims = append(e.picDims, [3]int{cfg.Width, cfg.Height, len(b)})
		}
	}
	return e
}

func sameFloat32(a, b float32) bool {
	return a == b || a != a && b != b
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name              string
		settings          string
		perWorker, images bool
	}{
		{"defaults", "tensorboard", false, true},
		{"per worker, no images", "{type: tensorboard, per_worker: true, images: false}", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			rs := testRecords(4, testPlots(t, out))
			path := writeAll(t, out, tt.settings, rs)
			if !strings.HasPrefix(path, filepath.Join(out, "tensorboard", "events.out.tfevents.")) {
				t.Errorf("path = %s, want OUT_DIR/tensorboard/events.out.tfevents.*", path)
			}
			evs := readEvents(t, path)
			if len(evs) != len(rs)+1 {
				t.Fatalf("got %d events, want %d", len(evs), len(rs)+1)
			}
			if evs[0].FileVersion != "brain.Event:2" || evs[0].WallTime != wallTime(t0) {
				t.Errorf("first event = %+v", evs[0])
			}
			for i, r := range rs {
				ev := evs[i+1]
				if ev.Step != r.Step || ev.WallTime != wallTime(r.End) {
					t.Errorf("step %d: event step %d at %v, want at %v", r.Step, ev.Step, ev.WallTime, r.End)
				}
				e := expect(t, out, r, tt.perWorker, tt.images)
				var tags, pics []string
				var vals []float32
				var dims [][3]int
				for _, v := range ev.Values {
					switch {
					case v.Simple != nil:
						tags, vals = append(tags, v.Tag), append(vals, *v.Simple)
					case v.Image != nil:
						pics = append(pics, v.Tag)
						dims = append(dims, [3]int{v.Image.Width, v.Image.Height, len(v.Image.PNG)})
					}
				}
				if !slices.Equal(tags, e.tags) {
					t.Fatalf("step %d: tags %q, want %q", r.Step, tags, e.tags)
				}
				for j := range vals {
					if !sameFloat32(vals[j], e.values[j]) {
						t.Errorf("step %d: %s = %v, want %v", r.Step, tags[j], vals[j], e.values[j])
					}
				}
				if !slices.Equal(pics, e.pics) || !slices.Equal(dims, e.picDims) {
					t.Errorf("step %d: images %q %v, want %q %v", r.Step, pics, dims, e.pics, e.picDims)
				}
			}
		})
	}
}

func TestSettings(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      Settings
		errs      []string
	}{
		{name: "bare name", doc: "tensorboard", want: Settings{TrackerSettings: config.TrackerSettings{Images: true}, Dir: "OUT/tensorboard"}},
		{name: "all keys", doc: "{type: tensorboard, images: false, per_worker: true, dir: /tmp/tb}",
			want: Settings{TrackerSettings: config.TrackerSettings{Images: false, PerWorker: true}, Dir: "/tmp/tb"}},
		{name: "typo", doc: "{type: tensorboard, imagse: true}",
			errs: []string{`sinks[1].imagse (line 1): unknown setting of a tensorboard sink: the settings are type, images, per_worker, dir, keys, include, exclude`}},
		{name: "bad values, all reported", doc: "type: tensorboard\nimages: \"yes\"\nper_worker: 1\ndir: \"\"\n",
			errs: []string{`sinks[1].images (line 2): "yes" is not allowed: must be true or false`,
				`sinks[1].per_worker (line 3): "1" is not allowed: must be true or false`,
				`sinks[1].dir (line 4): "" is not allowed: must be a directory path`}},
		{name: "typo and duplicate", doc: "type: tensorboard\nper_workr: true\ndir: a\ndir: b\n",
			errs: []string{`sinks[1].per_workr (line 2): unknown setting of a tensorboard sink: the settings are type, images, per_worker, dir, keys, include, exclude; did you mean per_worker?`,
				`sinks[1].dir (line 4): is given twice, at lines 3 and 4`}},
		{name: "not a mapping inside", doc: "{type: tensorboard, dir: {a: b}}",
			errs: []string{`sinks[1].dir (line 1): a mapping is not allowed: must be a string`}},
		{name: "list value", doc: "{type: tensorboard, images: [true]}",
			errs: []string{`sinks[1].images (line 1): a list is not allowed: must be true or false`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeSettings("OUT", sinkspec.Parse(t, "sinks[1]", tt.doc))
			if len(tt.errs) == 0 {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var ps config.Problems
			if !errors.As(err, &ps) || len(ps) != len(tt.errs) {
				t.Fatalf("error %v, want %d problems", err, len(tt.errs))
			}
			for i, want := range tt.errs {
				if !strings.HasPrefix(ps[i], want) {
					t.Errorf("problem %d = %q, want prefix %q", i, ps[i], want)
				}
			}
		})
	}
}

func TestUnwritableDirectory(t *testing.T) {
	tmp := t.TempDir()
	blocker := filepath.Join(tmp, "a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, outDir, settings string }{
		{"out dir under a file", filepath.Join(blocker, "out"), "tensorboard"},
		{"dir setting under a file", tmp, fmt.Sprintf("{type: tensorboard, dir: %q}", filepath.Join(blocker, "tb"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New(tt.outDir, sinkspec.Parse(t, "sinks[1]", tt.settings), nil)
			if err == nil {
				w.Close(context.Background())
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "create tensorboard directory") || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("error %q does not say what failed", err)
			}
		})
	}
}

// failAt puts w's event file, as written so far, under a file that fails its nth write from
// now on as a full disk does.
func failAt(t *testing.T, w *Writer, n int) {
	t.Helper()
	f, err := os.OpenFile(w.Path(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close()
	d := &testkit.FullDisk{File: f}
	d.FailWrite(n)
	if w.f, err = appendlog.New(d, w.Path()); err != nil {
		t.Fatal(err)
	}
}

// TestRetryAfterFailedWrite checks that a step whose write failed halfway, written again as
// the queue retries it, leaves exactly the file of a run without the failure.
func TestRetryAfterFailedWrite(t *testing.T) {
	rs := testRecords(3, nil)
	clean := writeAll(t, t.TempDir(), "tensorboard", rs)

	w, err := open(t.TempDir(), sinkspec.Parse(t, "sinks[1]", "tensorboard"), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	failAt(t, w, 2)
	ctx := context.Background()
	if err := w.Write(ctx, rs[0]); err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, rs[1])
	if err == nil || !strings.Contains(err.Error(), "write step 1") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("error = %v, want the write failure of step 1", err)
	}
	for _, r := range rs[1:] {
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, rs[0]); !errors.Is(err, errClosed) {
		t.Errorf("write after close: %v", err)
	}
	a, _ := os.ReadFile(clean)
	b, _ := os.ReadFile(w.Path())
	if !bytes.Equal(a, b) {
		t.Errorf("file after a failed and retried write differs from a clean one (%d vs %d bytes)", len(b), len(a))
	}
}

func TestMissingPlotIsLeftOut(t *testing.T) {
	out := t.TempDir()
	rs := testRecords(2, []string{"plots/none.png", "not-a-png.png"})
	if err := os.WriteFile(filepath.Join(out, "not-a-png.png"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs := readEvents(t, writeAll(t, out, "tensorboard", rs))
	for _, v := range evs[2].Values {
		if v.Image != nil {
			t.Errorf("unexpected image %s", v.Tag)
		}
	}
	if len(evs[2].Values) != len(rs[1].Metrics) {
		t.Errorf("step 1 has %d values, want %d scalars", len(evs[2].Values), len(rs[1].Metrics))
	}
}

func TestConcurrentWriteAndClose(t *testing.T) {
	w, err := open(t.TempDir(), sinkspec.Parse(t, "sinks[1]", "tensorboard"), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, r := range testRecords(8, nil) {
		wg.Go(func() { _ = w.Write(context.Background(), r) })
	}
	wg.Go(func() { _ = w.Close(context.Background()) })
	wg.Wait()
	readEvents(t, w.Path()) // whole records only, whatever the order
}

func TestCanceledContext(t *testing.T) {
	w, err := open(t.TempDir(), sinkspec.Parse(t, "sinks[1]", "tensorboard"), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Write(ctx, testRecords(1, nil)[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}
