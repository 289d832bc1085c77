package promname

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/step"
)

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
	run, err := promtest.SimulateRun(promtest.RunOptions{Servers: 2, DP: 2, Steps: 4, Scrapes: 5, Interval: time.Second,
		End: time.Unix(1_800_000_000, 0), Prefix: "vllm", PerWorker: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	r, rollout, eval := promtest.WithPhases(t, run)
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
