package remotewrite

import (
	"fmt"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/step"
)

// phaseRecords are the shared run's steps 2 and on, each with a phase rollout whose figures are
// those of the step two before, and every other one with a phase eval with those of the step
// before (typed values and keys both, as the tracker makes them).
func phaseRecords(t *testing.T) []step.Record {
	t.Helper()
	run := testRun(t)
	var out []step.Record
	for i := 2; i < len(run.Records); i++ {
		r := run.Records[i]
		a, b := &run.Records[i-2], &run.Records[i-1]
		r.Phases = map[string]*step.Phase{"rollout": {DurationS: 7, Intervals: 1, Metrics: a.Metrics, Values: a.Values}}
		if i%2 == 0 {
			r.Phases["eval"] = &step.Phase{DurationS: 2.5, Intervals: 3, Metrics: b.Metrics, Values: b.Values}
		}
		out = append(out, r)
	}
	return out
}

// TestWritePhases sends steps with phases and reads the requests with the test's own decoder:
// each phase's figures are series of the whole step's names with a phase label, the whole
// step's own series keep theirs without one.
func TestWritePhases(t *testing.T) {
	recs := phaseRecords(t)
	r := newReceiver(t)
	w := newWriter(testSettings(r.url()), "vllm", nil)
	writeAll(t, w, recs)
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, samples, _ := r.stored()
	want, n := expected(recs, nil, testExtra)
	compare(t, got, want)
	if samples != n {
		t.Errorf("stored %d samples, want %d", samples, n)
	}
	run := testRun(t)
	phase := func(name, ph string, ls ...promname.Label) string {
		return seriesKey(name, append(ls, promname.Label{Name: "phase", Value: ph}), testExtra)
	}
	checked := 0
	for i, rec := range recs {
		at := float64(rec.End.UnixMilli())
		a := run.Records[i] // rollout's figures
		checks := map[string]float64{
			phase("vllmstat_step_duration_seconds", "rollout"): 7,
			phase("vllmstat_step_phase_intervals", "rollout"):  1,
		}
		// A step without prefix-cache queries has no hit rate: only the keys a record has are
		// series.
		add := func(series string, m map[string]float64, key string) {
			if v, ok := m[key]; ok {
				checks[series] = v
			}
		}
		add(seriesKey("vllmstat_step_vllm_prefix_cache_hit_rate", nil, testExtra), rec.Metrics, "vllm/prefix_cache_hit_rate")
		add(phase("vllmstat_step_vllm_prefix_cache_hit_rate", "rollout"), a.Metrics, "vllm/prefix_cache_hit_rate")
		add(phase("vllmstat_step_vllm_generation_tokens_per_second", "rollout"), a.Metrics, "vllm/generation_tokens_per_s")
		add(phase("vllmstat_step_vllm_kv_cache_usage_perc", "rollout", promname.Label{Name: "stat", Value: "p95"}), a.Metrics, "vllm/kv_cache_usage_perc/p95")
		if rec.Phases["eval"] != nil {
			add(phase("vllmstat_step_vllm_prompt_tokens", "eval"), run.Records[i+1].Metrics, "vllm/prompt_tokens")
			checks[phase("vllmstat_step_phase_intervals", "eval")] = 3
		}
		for k, v := range checks {
			found := false
			for _, s := range got[k] {
				if s[1] == at {
					found = true
					if s[0] != v {
						t.Errorf("step %d: %s = %v, want %v", rec.Step, k, s[0], v)
					}
				}
			}
			if !found {
				t.Errorf("step %d: no sample of %s", rec.Step, k)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d samples checked", checked)
	}
}

// TestPrometheusStoresPhases sends steps with phases to a real Prometheus and queries them by
// phase: phase="" selects the whole step's series, phase="rollout" the phase's.
func TestPrometheusStoresPhases(t *testing.T) {
	p, err := sharedPrometheus()
	promtest.Require(t, err)
	recs := phaseRecords(t)
	runID := fmt.Sprintf("phases-%d", time.Now().UnixNano())
	s := testSettings(p.RemoteWriteURL())
	s.ExtraLabels = []promname.Label{{Name: "run", Value: runID}}
	w := newWriter(s, "vllm", nil)
	writeAll(t, w, recs)
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	run := testRun(t)
	last := recs[len(recs)-1]
	for _, tt := range []struct {
		phase string
		want  func(i int) float64
	}{
		{"", func(i int) float64 { return recs[i].Metrics["vllm/generation_tokens"] }},
		{"rollout", func(i int) float64 { return run.Records[i].Metrics["vllm/generation_tokens"] }},
	} {
		q := fmt.Sprintf(`vllmstat_step_vllm_generation_tokens{run=%q,stat="",phase=%q}[1h]`, runID, tt.phase)
		series, err := promtest.Query(t.Context(), p.Server, q, last.End.Add(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if len(series) != 1 || len(series[0].Samples) != len(recs) {
			t.Fatalf("%s: %v", q, series)
		}
		for i, smp := range series[0].Samples {
			if smp.T != recs[i].End.UnixMilli() || smp.V != tt.want(i) {
				t.Errorf("%s: sample %d is %v at %d, want %v at %d", q, i, smp.V, smp.T, tt.want(i), recs[i].End.UnixMilli())
			}
		}
	}
}
