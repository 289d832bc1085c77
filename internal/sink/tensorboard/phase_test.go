package tensorboard

import (
	"math"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// phaseRecords are testRecords whose steps have phases: none in step 0, rollout in step 1,
// rollout and eval in step 2, eval alone (a NaN among its values) in step 3.
func phaseRecords() []*step.Record {
	rs := testRecords(4, nil)
	rollout := func(i int) *step.Phase {
		return &step.Phase{DurationS: 20, Intervals: 1, Metrics: map[string]float64{
			"vllm/prefix_cache_hit_rate":   0.5 + float64(i)/10,
			"vllm/generation_tokens_per_s": 1000 * float64(i),
			"vllm/kv_cache_usage_perc/p95": 0.25,
		}}
	}
	eval := func(v float64) *step.Phase {
		return &step.Phase{DurationS: 5, Intervals: 2, Metrics: map[string]float64{
			"vllm/generation_tokens_per_s": v,
			"vllm/num_preemptions":         0,
		}}
	}
	rs[1].Phases = map[string]*step.Phase{"rollout": rollout(1)}
	rs[2].Phases = map[string]*step.Phase{"rollout": rollout(2), "eval": eval(321.5)}
	rs[3].Phases = map[string]*step.Phase{"eval": eval(math.NaN())}
	return rs
}

// wantPhaseTags are tags that the phases of phaseRecords must give, spelled out rather than
// made with step.PhaseKey.
var wantPhaseTags = []map[string]float32{
	1: {"vllm/rollout/prefix_cache_hit_rate": 0.6, "vllm/rollout/generation_tokens_per_s": 1000, "vllm/rollout/kv_cache_usage_perc/p95": 0.25},
	2: {"vllm/rollout/prefix_cache_hit_rate": 0.7, "vllm/rollout/generation_tokens_per_s": 2000, "vllm/rollout/kv_cache_usage_perc/p95": 0.25,
		"vllm/eval/generation_tokens_per_s": 321.5, "vllm/eval/num_preemptions": 0},
	3: {"vllm/eval/generation_tokens_per_s": float32(math.NaN()), "vllm/eval/num_preemptions": 0},
}

// TestPhases writes steps with phases and reads them back with this package's reader: every
// step's keys and its phases' keys under vllm/<phase>/, in order, with their values.
func TestPhases(t *testing.T) {
	out := t.TempDir()
	rs := phaseRecords()
	evs := readEvents(t, writeAll(t, out, "{type: tensorboard, per_worker: true}", rs))
	if len(evs) != len(rs)+1 {
		t.Fatalf("got %d events, want %d", len(evs), len(rs)+1)
	}
	for i, r := range rs {
		got := map[string]float32{}
		var tags []string
		for _, v := range evs[i+1].Values {
			got[v.Tag] = *v.Simple
			tags = append(tags, v.Tag)
		}
		e := expect(t, out, r, true, false)
		if len(tags) != len(e.tags) {
			t.Fatalf("step %d: tags %q, want %q", r.Step, tags, e.tags)
		}
		for j := range tags {
			if tags[j] != e.tags[j] || !sameFloat32(got[tags[j]], e.values[j]) {
				t.Errorf("step %d: tag %d is %s = %v, want %s = %v", r.Step, j, tags[j], got[tags[j]], e.tags[j], e.values[j])
			}
		}
		for tag, want := range wantPhaseTags[i] {
			if v, ok := got[tag]; !ok || !sameFloat32(v, want) {
				t.Errorf("step %d: %s = %v (present %v), want %v", r.Step, tag, v, ok, want)
			}
		}
		if n := len(r.Metrics) + len(wantPhaseTags[i]) + 2; len(tags) != n { // 2 per-worker scalars
			t.Errorf("step %d: %d scalars, want %d", r.Step, len(tags), n)
		}
	}
}

// TestPythonReadsPhases checks the same with the independent reader.
func TestPythonReadsPhases(t *testing.T) {
	out := t.TempDir()
	rs := phaseRecords()
	evs := pythonRead(t, writeAll(t, out, "tensorboard", rs))
	if len(evs) != len(rs)+1 {
		t.Fatalf("python read %d events, want %d", len(evs), len(rs)+1)
	}
	for i, r := range rs {
		got := map[string]float64{}
		for _, v := range evs[i+1].Values {
			got[v.Tag] = pyFloat(t, v.Simple)
		}
		if len(got) != len(r.Metrics)+len(wantPhaseTags[i]) {
			t.Errorf("step %d: %d scalars, want %d", r.Step, len(got), len(r.Metrics)+len(wantPhaseTags[i]))
		}
		for tag, want := range wantPhaseTags[i] {
			if v, ok := got[tag]; !ok || !(v == float64(want) || math.IsNaN(v) && math.IsNaN(float64(want))) {
				t.Errorf("step %d: %s = %v (present %v), want %v", r.Step, tag, v, ok, want)
			}
		}
	}
}
