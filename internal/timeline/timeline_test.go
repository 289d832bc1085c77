package timeline

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

func testRecord() *step.Record {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	pts := func(vs ...float64) []step.Point {
		ps := make([]step.Point, len(vs))
		for i, v := range vs {
			ps[i] = step.Point{OffsetS: 0.5 * float64(i+1), Value: v}
		}
		return ps
	}
	return &step.Record{
		Step:  7,
		Start: start,
		End:   start.Add(2500 * time.Millisecond),
		Timeline: &step.Timeline{Start: start, Workers: []step.WorkerTimeline{
			// Out of order on purpose: the file sorts workers.
			{WorkerID: step.WorkerID{Target: "http://w1:8000/metrics", Engine: "0"}, Series: map[string][]step.Point{
				"num_requests_running": pts(0, 0, 3, 4, 0),
				"kv_cache_usage_perc":  pts(0, 0.125, 0.5, 0.875, 0.0000001),
			}},
			{WorkerID: step.WorkerID{Target: "http://w0:8000/metrics"}, Series: map[string][]step.Point{
				"num_requests_running":  pts(2, 2, 2, 1, 1),
				"generation_tokens":     pts(1e21, 250, 300, 1200, 17),
				"prefix_cache_hit_rate": {{OffsetS: 1, Value: 0.75}, {OffsetS: 1.5, Value: math.NaN()}, {OffsetS: 2, Value: 1}},
				"num_preemptions":       {},
			}},
		}},
	}
}

func TestMarshalGolden(t *testing.T) {
	got, err := Marshal(FromRecord(testRecord()))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "step_000007.json", got)
}

func TestMarshalNoTimeline(t *testing.T) {
	r := testRecord()
	r.Timeline = nil
	got, err := Marshal(FromRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "no_timeline.json", got)
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := testRecord()
	path, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "timelines", "step_000007.json"); path != want {
		t.Fatalf("path = %q, want %q", path, want)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Step != 7 || !f.Start.Equal(r.Start) || !f.End.Equal(r.End) || f.DurationS() != 2.5 {
		t.Errorf("header = %d %v %v", f.Step, f.Start, f.End)
	}
	if len(f.Workers) != 2 || f.Workers[0].Target != "http://w0:8000/metrics" || f.Workers[1].Engine != "0" {
		t.Fatalf("workers = %+v", f.Workers)
	}
	// The NaN point is left out; every other point comes back exactly.
	want := FromRecord(r)
	want.Workers[0].Series["prefix_cache_hit_rate"] = []step.Point{{OffsetS: 1, Value: 0.75}, {OffsetS: 2, Value: 1}}
	for i := range want.Workers {
		for name, ps := range want.Workers[i].Series {
			got := f.Workers[i].Series[name]
			if len(ps) == 0 && len(got) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, ps) {
				t.Errorf("worker %d %s = %v, want %v", i, name, got, ps)
			}
		}
	}
	// Rewriting gives the same bytes.
	a, _ := os.ReadFile(path)
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("re-encoding a read file changed it:\n%s\n%s", a, b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("timelines folder holds %d entries, want 1 (no temporary files)", len(entries))
	}
}

func TestSteps(t *testing.T) {
	dir := t.TempDir()
	if steps, err := Steps(dir); err != nil || steps != nil {
		t.Fatalf("Steps of a run without timelines = %v, %v", steps, err)
	}
	for _, n := range []int64{12, 3, 1000000} {
		r := testRecord()
		r.Step = n
		if _, err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"step_x.json", "notes.txt", ".step_000004.json.123"} {
		os.WriteFile(filepath.Join(dir, Dir, name), nil, 0o644)
	}
	steps, err := Steps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 12, 1000000}; !reflect.DeepEqual(steps, want) {
		t.Errorf("Steps = %v, want %v", steps, want)
	}
	if _, err := os.Stat(Path(dir, 1000000)); err != nil || Name(1000000) != "step_1000000.json" {
		t.Errorf("seven-digit step: %v %s", err, Name(1000000))
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, x := range []float64{0, 1, -1, 0.1, 1e-7, 1.5e-9, 1e20, 1e21, 123456789.125, -3.25e-10, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		want, _ := jsonNumber(x)
		if got := string(appendFloat(nil, x)); got != want {
			t.Errorf("appendFloat(%v) = %s, want %s", x, got, want)
		}
	}
}
