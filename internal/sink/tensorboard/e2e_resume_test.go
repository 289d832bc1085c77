package tensorboard_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/vllmstat/vllmstat/internal/e2etest"
	"github.com/vllmstat/vllmstat/internal/sink/tensorboard"
)

// TestRunResumedOneStepAxis runs "vllmstat run" twice into one out_dir, the second continuing
// the first's steps, and reads the two event files of the tensorboard directory in the order
// of their names, as TensorBoard does, with the independent reader: every step of steps.jsonl
// once, in order, with its values.
func TestRunResumedOneStepAxis(t *testing.T) {
	out := t.TempDir()
	const yaml = "sinks: [jsonl, tensorboard]\n"
	e2etest.Run(t, out, yaml, 2)
	e2etest.Run(t, out, yaml, len(e2etest.Steps(t, out))+2)
	recs := e2etest.Steps(t, out)
	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	slices.Sort(files)
	if len(files) != 2 {
		t.Fatalf("event files %v, want one per run", files)
	}
	var evs []tensorboard.PyEvent
	for _, f := range files {
		fe := tensorboard.PythonRead(t, f)
		if len(fe) == 0 || fe[0].FileVersion != "brain.Event:2" {
			t.Fatalf("%s: %d events, first %+v", f, len(fe), fe)
		}
		evs = append(evs, fe[1:]...)
	}
	if len(evs) != len(recs) {
		t.Fatalf("%d step events in the two files, steps.jsonl has %d steps", len(evs), len(recs))
	}
	for i, r := range recs {
		if evs[i].Step != r.Step {
			t.Errorf("event %d: step %d, want %d", i, evs[i].Step, r.Step)
		}
		got := map[string]float64{}
		for _, v := range evs[i].Values {
			f, _ := strconv.ParseFloat(v.Simple, 64)
			got[v.Tag] = f
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
