package tensorboard_test

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vllmstat/vllmstat/internal/e2etest"
	"github.com/vllmstat/vllmstat/internal/sink/tensorboard"
)

// TestDemoWritesTensorBoard runs "vllmstat demo" with the tensorboard sink and checks that the
// independent reader decodes exactly the step records of steps.jsonl, plots included.
func TestDemoWritesTensorBoard(t *testing.T) {
	out := t.TempDir()
	e2etest.Demo(t, out, "--sinks", "jsonl,tensorboard")
	compareEvents(t, out, true)
}

// TestRunWritesTensorBoard runs "vllmstat run" against a simulated fleet with sinks
// [jsonl, tensorboard] from a config file, stops it as SIGINT would, and checks the event file
// with the independent reader.
func TestRunWritesTensorBoard(t *testing.T) {
	out := t.TempDir()
	const during = 3
	e2etest.Run(t, out, "sinks: [jsonl, tensorboard]\n", during)
	// Run stops the run once steps.jsonl has `during` steps, or when its wait gives up; the
	// step closed at shutdown comes on top. Without this check, a run whose timer closed no
	// step at all would pass on that last step alone.
	if recs := e2etest.Steps(t, out); len(recs) < during+1 {
		t.Fatalf("%d steps written, want %d closed during the run and one at shutdown", len(recs), during)
	}
	compareEvents(t, out, false)
}

// compareEvents checks that the run's event file holds exactly the records of its steps.jsonl,
// decoded by the independent reader; with plots, every step also carries images.
func compareEvents(t *testing.T, out string, plots bool) {
	t.Helper()
	recs := e2etest.Steps(t, out)
	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v", files)
	}
	evs := tensorboard.PythonRead(t, files[0])
	if len(evs) != len(recs)+1 || evs[0].FileVersion != "brain.Event:2" {
		t.Fatalf("%d events for %d steps", len(evs), len(recs))
	}
	for i, r := range recs {
		ev := evs[i+1]
		if ev.Step != r.Step {
			t.Errorf("event %d: step %d, want %d", i+1, ev.Step, r.Step)
		}
		wt, _ := strconv.ParseFloat(ev.WallTime, 64)
		if math.Abs(wt-float64(r.End.UnixNano())/1e9) > 1e-6 {
			t.Errorf("step %d: wall time %v, want %v", r.Step, wt, r.End)
		}
		got := map[string]float64{}
		images := 0
		for _, v := range ev.Values {
			if v.Image != nil {
				images++ // timeline plots come as image summaries
				continue
			}
			f, _ := strconv.ParseFloat(v.Simple, 64)
			got[v.Tag] = f
		}
		if plots && images == 0 {
			t.Errorf("step %d: no timeline plots among the events", r.Step)
		}
		if len(got) != len(r.Metrics) {
			t.Errorf("step %d: %d scalars, steps.jsonl has %d", r.Step, len(got), len(r.Metrics))
		}
		for k, v := range r.Metrics {
			if g, ok := got[k]; !ok || float32(g) != float32(v) {
				t.Errorf("step %d: %s = %v, steps.jsonl says %v", r.Step, k, g, v)
			}
		}
	}
}
