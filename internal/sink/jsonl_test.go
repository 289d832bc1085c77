package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

func openFullDisk(t *testing.T, opt JSONLOptions) (*JSONL, *testkit.FullDisk, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d := &testkit.FullDisk{File: f}
	j, err := NewJSONL(d, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	return j, d, path
}

// fileSteps returns the step numbers of the file's lines, failing on any line that is not a
// whole record.
func fileSteps(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("file ends with a partial line: %q", b[bytes.LastIndexByte(b, '\n')+1:])
	}
	var out []int64
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r step.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("line %q is not a whole record: %v", l, err)
		}
		out = append(out, r.Step)
	}
	return out
}

func writeStep(t *testing.T, j *JSONL, n int64) {
	t.Helper()
	r := step.Record{Step: n, DurationS: 1.5, Metrics: map[string]float64{"vllm/generation_tokens": float64(100 * n)}}
	if err := j.Write(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
}

func TestJSONLFullDiskRecovers(t *testing.T) {
	var logs bytes.Buffer
	j, d, path := openFullDisk(t, JSONLOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	writeStep(t, j, 1)
	writeStep(t, j, 2)
	d.Full = true
	for n := int64(3); n <= 5; n++ {
		writeStep(t, j, n)
		if got := fileSteps(t, path); len(got) != 2 {
			t.Fatalf("while full, the file holds steps %v, want 1 and 2 only", got)
		}
	}
	if q := j.Stats().Queued.Load(); q != 3 {
		t.Errorf("%d steps waiting, want 3", q)
	}
	d.Full = false
	writeStep(t, j, 6)
	if err := j.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := fileSteps(t, path); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("file holds steps %v, want 1..6 in order", got)
	}
	if n := strings.Count(logs.String(), "steps file write failed"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "steps file recovered"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, logs.String())
	}
	st := j.Stats()
	if st.Written.Load() != 6 || st.Errors.Load() != 3 || st.Dropped.Load() != 0 || st.Queued.Load() != 0 {
		t.Errorf("stats written %d errors %d dropped %d queued %d, want 6 3 0 0", st.Written.Load(), st.Errors.Load(), st.Dropped.Load(), st.Queued.Load())
	}
}

func TestJSONLFullAtCloseNamesTheSteps(t *testing.T) {
	j, d, path := openFullDisk(t, JSONLOptions{})
	writeStep(t, j, 1)
	d.Full = true
	writeStep(t, j, 2)
	writeStep(t, j, 3)
	writeStep(t, j, 5)
	err := j.Close(context.Background())
	if err == nil {
		t.Fatal("close with steps not written returned nil")
	}
	for _, want := range []string{"3 steps not written", "steps 2-3, 5", "no space left on device", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := fileSteps(t, path); !slices.Equal(got, []int64{1}) {
		t.Fatalf("file holds %v, want step 1 whole and nothing else", got)
	}
	if j.Stats().Dropped.Load() != 3 {
		t.Errorf("dropped %d, want 3", j.Stats().Dropped.Load())
	}
}

func TestJSONLMemoryBound(t *testing.T) {
	line, _ := step.MarshalLine(&step.Record{Step: 1, DurationS: 1.5, Metrics: map[string]float64{"vllm/generation_tokens": 100}})
	var logs bytes.Buffer
	j, d, path := openFullDisk(t, JSONLOptions{MaxPending: 2*len(line) + 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	d.Full = true
	for n := int64(1); n <= 6; n++ {
		writeStep(t, j, n) // two fit the bound
	}
	d.Full = false
	writeStep(t, j, 7)
	err := j.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "steps 3-6") {
		t.Fatalf("close: %v, want the dropped steps 3-6 named", err)
	}
	if got := fileSteps(t, path); !slices.Equal(got, []int64{1, 2, 7}) {
		t.Fatalf("file holds %v, want 1, 2, 7", got)
	}
	if n := strings.Count(logs.String(), "exceed the memory bound"); n != 1 {
		t.Errorf("memory bound logged %d times, want once", n)
	}
}

func TestJSONLRepairsTail(t *testing.T) {
	whole := `{"step":1,"duration_s":1}` + "\n"
	for _, tt := range []struct {
		name, in, want, kept, log string
	}{
		{"whole", whole, whole, "", ""},
		{"partial line cut off", whole + `{"step":2,"dura`, whole, `{"step":2,"dura`, "bytes=15"},
		{"only a partial line", `{"st`, "", `{"st`, "bytes=4"},
		{"whole record without newline", whole + `{"step":2}`, whole + `{"step":2}` + "\n", "", "added it"},
		{"empty", "", "", "", ""},
		{"a last line that is not JSON", whole + "not json\n", whole, "not json\n", "is not JSON"},
		{"not JSON, then a partial line", whole + "not json\n" + `{"step":2,"d`, whole, "not json\n" + `{"step":2,"d`, "is not JSON"},
		{"not JSON before the last line", "not json\n" + whole, "not json\n" + whole, "", ""},
		{"only a line that is not JSON", "<html>\n", "", "<html>\n", "bytes=7"},
		{"a blank last line", whole + "\n", whole, "\n", "bytes=1"},
		{"JSON but no step", whole + "null\n", whole + "null\n", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "steps.jsonl")
			os.WriteFile(path, []byte(tt.in), 0o644)
			if tt.kept != "" { // an earlier repair's file is kept too
				os.WriteFile(path+".corrupt-1", []byte("earlier"), 0o644)
			}
			var logs bytes.Buffer
			j, err := OpenJSONL(path, JSONLOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			writeStep(t, j, 3)
			if err := j.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			if got, ok := strings.CutSuffix(string(b), "\n"); !ok || !strings.HasPrefix(got, tt.want) || strings.Count(got[len(tt.want):], "\n") != 0 {
				t.Fatalf("file %q, want %q then step 3's line", b, tt.want)
			}
			if tt.log == "" && logs.Len() > 0 || !strings.Contains(logs.String(), tt.log) {
				t.Errorf("log %q, want %q", logs.String(), tt.log)
			}
			files, _ := filepath.Glob(path + ".corrupt-*")
			if tt.kept == "" {
				if len(files) > 0 {
					t.Errorf("nothing taken out, but %v written", files)
				}
				return
			}
			kept, err := os.ReadFile(path + ".corrupt-2")
			if err != nil || string(kept) != tt.kept || len(files) != 2 {
				t.Errorf("kept %q (%v) in %v, want %q in steps.jsonl.corrupt-2 beside the earlier one", kept, err, files, tt.kept)
			}
			if !strings.Contains(logs.String(), "kept_as="+path+".corrupt-2") {
				t.Errorf("log %q does not name the file the bytes went to", logs.String())
			}
		})
	}
}

func TestRanges(t *testing.T) {
	for _, tt := range []struct {
		in   []int64
		want string
	}{
		{[]int64{4}, "step 4"},
		{[]int64{1, 2, 3, 7, 9, 10}, "steps 1-3, 7, 9-10"},
		{[]int64{5, 6}, "steps 5-6"},
	} {
		if got := Ranges(tt.in); got != tt.want {
			t.Errorf("Ranges(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
