package step

import (
	"slices"
	"testing"
)

// TestDepartedWorkerForgotten: engine 1 is on no page of step 2, whose target answered twice,
// so it is forgotten at step 2's close; back in step 3 it is a new worker, whose first scrape is
// a baseline (its 50 tokens while away are nobody's). Engine 2 also leaves for step 2 and
// comes back in step 3 with a _created after its target's previous answer: all of its count is
// new.
func TestDepartedWorkerForgotten(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(s float64, es ...eng) { tr.Observe(at(s), target, mustPage(t, es...), nil) }
	obs(0, eng{engine: "0", gen: 100}, eng{engine: "1", gen: 10}, eng{engine: "2", gen: 7})
	obs(1, eng{engine: "0", gen: 110}, eng{engine: "1", gen: 20}, eng{engine: "2", gen: 8})
	if r := tr.EndStep(1, at(1)); len(r.Forgotten) != 0 || tr.KeptWorkers() != 3 {
		t.Fatalf("step 1 forgot %v, keeps %d workers; want none forgotten, 3 kept", r.Forgotten, tr.KeptWorkers())
	}
	obs(2, eng{engine: "0", gen: 120})
	obs(3, eng{engine: "0", gen: 130})
	r := tr.EndStep(2, at(3))
	gone := []WorkerID{{Target: target, Engine: "1"}, {Target: target, Engine: "2"}}
	if !slices.Equal(r.Forgotten, gone) || tr.KeptWorkers() != 1 {
		t.Fatalf("step 2 forgot %v, keeps %d workers; want %v, 1 kept", r.Forgotten, tr.KeptWorkers(), gone)
	}
	obs(4, eng{engine: "0", gen: 140}, eng{engine: "1", gen: 70}, eng{engine: "2", gen: 3, created: unix(3.5)})
	obs(5, eng{engine: "0", gen: 150}, eng{engine: "1", gen: 75}, eng{engine: "2", gen: 4, created: unix(3.5)})
	r = tr.EndStep(3, at(5))
	want2 := map[string]float64{"0": 20, "1": 5, "2": 4}
	for _, w := range r.PerWorker {
		if got := w.Metrics["vllm/generation_tokens"]; got != want2[w.Engine] {
			t.Errorf("step 3: engine %s counted %v, want %v", w.Engine, got, want2[w.Engine])
		}
	}
	want(t, r.Metrics, "vllm/generation_tokens", 29)
}

// TestWorkerAbsentPartOfStepKept: a worker missing from some pages of a step, from every page of
// a step of one page, or whose target failed every scrape of a step, is not forgotten: what it
// counted meanwhile lands at its next page.
func TestWorkerAbsentPartOfStepKept(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(s float64, es ...eng) { tr.Observe(at(s), target, mustPage(t, es...), nil) }
	obs(0, eng{engine: "0", gen: 100}, eng{engine: "1", gen: 10})
	obs(0.5, eng{engine: "0", gen: 105})
	obs(1, eng{engine: "0", gen: 110}, eng{engine: "1", gen: 15})
	tr.EndStep(1, at(1))
	obs(2, eng{engine: "0", gen: 120}) // step 2: one page, without engine 1
	if r := tr.EndStep(2, at(2)); len(r.Forgotten) != 0 {
		t.Fatalf("a step of one page forgot %v", r.Forgotten)
	}
	tr.Observe(at(3), target, nil, errTest) // step 3: the target fails throughout
	tr.Observe(at(4), target, nil, errTest)
	if r := tr.EndStep(3, at(4)); len(r.Forgotten) != 0 {
		t.Fatalf("a step of failed scrapes forgot %v", r.Forgotten)
	}
	obs(5, eng{engine: "0", gen: 130})
	obs(6, eng{engine: "0", gen: 140}, eng{engine: "1", gen: 40})
	r := tr.EndStep(4, at(6))
	if len(r.Forgotten) != 0 || tr.KeptWorkers() != 2 {
		t.Fatalf("step 4 forgot %v, keeps %d workers; want none forgotten, 2 kept", r.Forgotten, tr.KeptWorkers())
	}
	want(t, r.Metrics, "vllm/generation_tokens", 20+25)
}

// TestStepWorkers counts the workers a target has had in the open step with a page's.
func TestStepWorkers(t *testing.T) {
	tr := NewTracker(Options{})
	pg := func(es ...string) []eng {
		var out []eng
		for _, e := range es {
			out = append(out, eng{engine: e})
		}
		return out
	}
	check := func(want int, es ...string) {
		t.Helper()
		if got := tr.StepWorkers(target, mustPage(t, pg(es...)...)); got != want {
			t.Errorf("StepWorkers with a page of %v = %d, want %d", es, got, want)
		}
	}
	check(2, "a", "b") // a target not seen yet
	tr.Observe(at(0), target, mustPage(t, pg("a", "b")...), nil)
	check(2, "a", "b")
	check(2, "b")
	check(3, "b", "c")
	tr.Observe(at(1), target, mustPage(t, pg("c")...), nil)
	check(3, "a")
	check(4, "d")
	tr.EndStep(1, at(1))
	check(1, "c")
	check(1, "a")
	check(2, "a", "c")
}
