package cli

import (
	"maps"
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// ledgerTolerance returns, per step (from 0) and per state (and at step.NumStates, for the
// engine time), how far the run's engine-seconds of engine e of server srv may be from the
// simulator's, in simulated time.
//
// A sample stands for the span since its target's previous scrape: the run books the span,
// from the previous sample's stamp to this one's, in the state of the sample's page. A page is
// the simulation at the moment the proxy answered, its engines as of the end of their
// iterations in flight then; the ground truth taken with it has the engine's time in each state
// up to that end (Through) and its state there (State), which the page shows. So the ground
// truth says what the engine did between two pages. Where it stayed in one state, the run
// books the span in that state, and along a stretch of one state the bookings add up to the
// stretch (the small differences between a page's moment and its stamp cancel out). Where it
// changed state, within the span or at its end, the run books the span wholly in the state at
// its end: the boundary between the two states is off by at most the span, measured from the
// previous page's moment to the later of this sample's stamp and this page's Through (its
// "width"). So each change allows its span's width to every state it involves: the states of
// the span, and the states at its two pages. A state's tolerance in a step is the sum of the
// widths of its changes there: one span per change, the spans being the run's actual scrapes.
// Two of the ledger's rules read a state from more than one page, and a change they read late
// is off by another span:
//   - SGLang shows a load at its end, and the run books the load's length back from the stamp
//     of the sample that showed it: the load's start is off as far as its end, by the span in
//     which the load ended.
//   - vLLM's wake-up is waking only after a sample that showed the engine asleep; a sleep that
//     no page showed (the scrapes were further apart than it lasted) makes the wake-up's
//     resource states a pause's. So each span of such a wake-up allows its width to waking and
//     to paused.
//
// A step ends where the trainer ended it, after the pages showed the simulator's step end: the
// run's step holds what came between the two, which the simulator counts in the next step, and
// the next step misses it. So each state the engine had around a step end is allowed, in both
// steps, the time from the simulator's step end to the run's; so is the engine time. Step 1
// starts at simulated time 0, the fleet's first scrape, and the run books nothing before the
// target's first page: that is step 1's start edge.
func ledgerTolerance(p *pacedFleet, run ledgerRun, truth sim.GroundTruth, srv, e int, kind vllm.Engine) [][step.NumStates + 1]time.Duration {
	idx := slices.IndexFunc(truth.Engines, func(t sim.EngineTruth) bool { return t.Server == srv && t.Engine == e })
	samples := run.samples[srv]
	p.mu.Lock()
	origin := p.origin
	p.mu.Unlock()
	booked := func(ts time.Time) time.Duration { return p.sim(ts.Sub(origin)) } // a stamp in simulated time

	// The spans, span n ending at sample n; span 0, from simulated time 0, is booked in no state.
	type span struct {
		from, to time.Duration       // the ground truth's Through at the two pages
		width    time.Duration       // how far the booking of a change in it may be off
		stamp    time.Time           // the sample's
		states   map[step.State]bool // the engine's states in it and at its two pages
		change   bool                // the engine changed state in it, or at its end
	}
	spans := make([]span, len(samples))
	var prev sim.EngineTruth
	var prevAt time.Duration // the previous page's moment
	slept := false           // a page showed the engine asleep, and none awake since
	loadFrom := -1           // the span in which the engine's load in progress started
	for n, s := range samples {
		g := s.page.truth.Engines[idx]
		sp := span{from: prev.Through, to: g.Through, width: max(g.Through, booked(s.stamp)) - prevAt, stamp: s.stamp,
			states: map[step.State]bool{step.State(g.State): true}}
		if n > 0 {
			sp.states[step.State(prev.State)] = true
		}
		for st, d := range g.Time {
			if d > prev.Time[st] {
				sp.states[step.State(st)] = true
			}
		}
		sp.change = n > 0 && len(sp.states) > 1
		if n > 0 && !slept && sp.states[step.Waking] {
			sp.states[step.Paused], sp.change = true, true
		}
		spans[n] = sp
		loading := g.State == sim.StateLoadingWeights
		if kind == vllm.SGLang && sp.states[step.LoadingWeights] {
			if loadFrom < 0 && prev.State != sim.StateLoadingWeights {
				loadFrom = n
			}
			if !loading && loadFrom >= 0 {
				spans[loadFrom].width = max(spans[loadFrom].width, sp.width)
				loadFrom = -1
			}
		}
		slept = g.State == sim.StateAsleep || slept && (g.State == sim.StateWaking || loading)
		prev, prevAt = g, s.page.truth.At
	}

	// edge returns, for the end of step k (from 0: step 1's start), the time the steps on either
	// side of it may be off, and the states the engine had around it: from the page before the
	// simulator's step end to the first sample the run booked after its own.
	edge := func(k int) (time.Duration, map[step.State]bool) {
		simEnd, runEnd := time.Duration(0), samples[0].stamp
		if k > 0 {
			simEnd, runEnd = truth.StepEnds[k-1], run.ends[k-1]
		}
		states := map[step.State]bool{}
		for _, sp := range spans {
			if sp.to >= simEnd || booked(sp.stamp) >= simEnd {
				maps.Copy(states, sp.states)
				if sp.stamp.After(runEnd) {
					break
				}
			}
		}
		return booked(runEnd) - simEnd, states
	}

	tol := make([][step.NumStates + 1]time.Duration, ledgerSteps)
	for k := 1; k <= ledgerSteps; k++ {
		t := &tol[k-1]
		simStart, simEnd := time.Duration(0), truth.StepEnds[k-1]
		runStart, runEnd := samples[0].stamp, run.ends[k-1]
		if k > 1 {
			simStart, runStart = truth.StepEnds[k-2], run.ends[k-2]
		}
		for _, sp := range spans {
			// A change in the simulator's step, or in a span the run booked in it.
			simulated := sp.to > simStart && sp.from < simEnd
			if sp.change && (simulated || sp.stamp.After(runStart) && !sp.stamp.After(runEnd)) {
				for st := range sp.states {
					t[st] += sp.width
				}
			}
		}
		for _, j := range []int{k - 1, k} {
			d, states := edge(j)
			for st := range states {
				t[st] += d
			}
			t[step.NumStates] += d
		}
	}
	return tol
}
