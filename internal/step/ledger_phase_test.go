package step

import "testing"

// TestLedgerPhaseRuns: in a phase a sample stands for the span since its target's previous
// scrape clipped to the start of the phase's current run: a phase that ran twice in a step has
// none of the time between its runs (nor before a run's start), and one open at a step end has
// its time up to the end in that step and from the next step's start in the next, one interval
// in each. Scrapes once a second:
//
//	t    event                  step 1          rollout
//	1    running 3              generating 1    -
//	1    start rollout
//	2    running 3              generating 1    generating 1
//	2    end rollout
//	3    running 3              generating 1    -
//	3.5  start rollout
//	4    running 0              idle 1          idle 0.5 (since 3.5)
//	4.5  end step 1 (rollout open: in step 2 from its start)
//	5    running 3              generating 0.5  generating 0.5 (since 4.5)
//	5.5  end rollout
//	6    running 0              idle 1          -
//	6    end step 2
func TestLedgerPhaseRuns(t *testing.T) {
	tr := NewTracker(Options{})
	observeText(t, tr, 0, vpage(0, 0))
	observeText(t, tr, 1, vpage(3, 10))
	tr.StartPhase("rollout", at(1))
	observeText(t, tr, 2, vpage(3, 20))
	tr.EndPhase("rollout", at(2))
	observeText(t, tr, 3, vpage(3, 30))
	tr.StartPhase("rollout", at(3.5))
	observeText(t, tr, 4, vpage(0, 40))
	r := tr.EndStep(1, at(4.5))
	wantLedger(t, r.Metrics, "vllm", map[State]float64{Generating: 3, Idle: 1})
	ph := r.Phases["rollout"]
	wantLedger(t, ph.Metrics, "vllm", map[State]float64{Generating: 1, Idle: 0.5})
	if ph.Intervals != 2 || ph.DurationS != 2 {
		t.Errorf("step 1: rollout ran %d times for %vs, want twice for 2s", ph.Intervals, ph.DurationS)
	}

	observeText(t, tr, 5, vpage(3, 50))
	tr.EndPhase("rollout", at(5.5))
	observeText(t, tr, 6, vpage(0, 60))
	r = tr.EndStep(2, at(6))
	wantLedger(t, r.Metrics, "vllm", map[State]float64{Generating: 0.5, Idle: 1})
	ph = r.Phases["rollout"]
	wantLedger(t, ph.Metrics, "vllm", map[State]float64{Generating: 0.5})
	if ph.Intervals != 1 || ph.DurationS != 1 {
		t.Errorf("step 2: rollout ran %d times for %vs, want once for 1s", ph.Intervals, ph.DurationS)
	}
}
