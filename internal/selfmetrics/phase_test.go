package selfmetrics

import (
	"bytes"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/step"
)

// withPhases returns a copy of run's step 2 with phases rollout and eval, whose figures are
// those of steps 0 and 1 (typed values and keys both), and the records they came from.
func withPhases(t *testing.T, run *promtest.Run) (r *step.Record, rollout, eval *step.Record) {
	t.Helper()
	if len(run.Records) < 3 {
		t.Fatalf("%d steps, want 3", len(run.Records))
	}
	rollout, eval = &run.Records[0], &run.Records[1]
	c := run.Records[2]
	c.Phases = map[string]*step.Phase{
		"rollout": {DurationS: 12.5, Intervals: 1, Metrics: rollout.Metrics, Values: rollout.Values},
		"eval":    {DurationS: 3, Intervals: 2, Metrics: eval.Metrics, Values: eval.Values},
	}
	return &c, rollout, eval
}

type series struct {
	name, labels string
	v            float64
}

// walk lists WalkStep's series of r, each with its labels spelled name=value, and apart the
// phase label's value, "" for none.
func walk(r *step.Record) (out []series, phases []string) {
	WalkStep("vllm", r, func(name string, labels []Label, v float64) {
		var ls []string
		phase := ""
		for _, l := range labels {
			if l.Name == "phase" {
				phase = l.Value
				continue
			}
			ls = append(ls, l.Name+"="+l.Value)
		}
		out = append(out, series{name, strings.Join(ls, ","), v})
		phases = append(phases, phase)
	})
	return out, phases
}

// TestWalkStepPhases: a phase's series are the whole step's families with a phase label, one
// for each of the step's own series of the phase's figures, with their values; the step's own
// series are unchanged, in their order; keys read back from JSON give the same series as typed
// values.
func TestWalkStepPhases(t *testing.T) {
	run := testRun(t)
	r, rollout, eval := withPhases(t, run)
	got, phases := walk(r)
	plain := *r
	plain.Phases = nil
	var own []series
	byPhase := map[string][]series{}
	for i, s := range got {
		if phases[i] != "" {
			byPhase[phases[i]] = append(byPhase[phases[i]], s)
			continue
		}
		own = append(own, s)
	}
	if want, _ := walk(&plain); !slices.Equal(own, want) {
		t.Errorf("the step's own series changed with phases:\n%v\nwant\n%v", own, want)
	}
	for name, from := range map[string]*step.Record{"rollout": rollout, "eval": eval} {
		ph := r.Phases[name]
		want := []series{{StepDuration, "", ph.DurationS}, {StepPhaseIntervals, "", float64(ph.Intervals)}}
		fromOwn, _ := walk(&step.Record{Values: from.Values, Metrics: from.Metrics})
		want = append(want, fromOwn[5:]...) // after number, duration, workers and two scrapes series
		if !slices.Equal(byPhase[name], want) {
			t.Errorf("phase %s: series\n%v\nwant the step's families of its figures\n%v", name, byPhase[name], want)
		}
		if len(want) < 50 {
			t.Errorf("phase %s: only %d series", name, len(want))
		}
	}
	if len(byPhase) != 2 {
		t.Errorf("series of phases %v, want rollout and eval", slices.Sorted(maps.Keys(byPhase)))
	}
	keyed := *r
	keyed.Values, keyed.PerWorker = nil, nil
	keyed.Phases = map[string]*step.Phase{}
	for name, ph := range r.Phases {
		c := *ph
		c.Values = nil
		keyed.Phases[name] = &c
	}
	typed := *r
	typed.PerWorker = nil
	a, pa := walk(&typed)
	b, pb := walk(&keyed)
	if !slices.Equal(a, b) || !slices.Equal(pa, pb) {
		t.Errorf("series from typed values\n%v\ndiffer from those of keys\n%v", a, b)
	}
}

// TestGaugesShowPhases reads /metrics as a scraper does: the last step's phases are series with
// a phase label beside the whole step's, and go away with a step without phases.
func TestGaugesShowPhases(t *testing.T) {
	run := testRun(t)
	r, rollout, eval := withPhases(t, run)
	m := New(Options{})
	m.StepClosed(r)
	body := get(t, m.Handler())
	got := parse(t, body)
	checks := map[string]float64{
		`vllmstat_step_vllm_prefix_cache_hit_rate{}`:                      r.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_step_vllm_prefix_cache_hit_rate{phase=rollout}`:         rollout.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_step_vllm_prefix_cache_hit_rate{phase=eval}`:            eval.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_step_vllm_kv_cache_usage_perc{phase=rollout,stat=p95}`:  rollout.Metrics["vllm/kv_cache_usage_perc/p95"],
		`vllmstat_step_vllm_generation_tokens_per_second{phase=eval}`:     eval.Metrics["vllm/generation_tokens_per_s"],
		`vllmstat_step_duration_seconds{}`:                                r.DurationS,
		`vllmstat_step_duration_seconds{phase=rollout}`:                   12.5,
		`vllmstat_step_phase_intervals{phase=eval}`:                       2,
		`vllmstat_step_vllm_kv_cache_usage_perc{phase=eval,stat=max}`:     eval.Metrics["vllm/kv_cache_usage_perc/max"],
		`vllmstat_step_vllm_num_requests_running{phase=rollout,stat=max}`: rollout.Metrics["vllm/num_requests_running/max"],
	}
	for k, v := range checks {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k, v := range want(r) {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if promtool, err := promtest.Binary("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
	next := run.Records[3]
	next.End = r.End.Add(time.Minute)
	m.StepClosed(&next)
	for k := range parse(t, get(t, m.Handler())) {
		if strings.Contains(k, "phase=") {
			t.Errorf("series %s stays after a step without phases", k)
		}
	}
}
