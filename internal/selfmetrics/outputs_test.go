package selfmetrics

import (
	"bytes"
	"os/exec"
	"testing"

	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/sink"
)

func TestOutputs(t *testing.T) {
	m := New(Options{})
	var steps, rec sink.Stats
	m.AddStepsFile(&steps)
	m.AddRecording(&rec)
	steps.Queued.Store(2)
	steps.Errors.Store(5)
	steps.Dropped.Store(3)
	rec.Queued.Store(40)
	rec.Errors.Store(6)
	rec.Dropped.Store(7)
	body := get(t, m.Handler())
	got := parse(t, body)
	for name, v := range map[string]float64{
		"vllmstat_steps_pending_write":            2,
		"vllmstat_steps_write_errors_total":       5,
		"vllmstat_steps_unwritten_total":          3,
		"vllmstat_recording_events_pending":       40,
		"vllmstat_recording_write_errors_total":   6,
		"vllmstat_recording_events_dropped_total": 7,
	} {
		if got[name+"{}"] != v {
			t.Errorf("%s = %v, want %v", name, got[name+"{}"], v)
		}
	}
	promtool, err := promtest.Binary("promtool")
	promtest.Require(t, err)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
