package fleetmodel

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// loopRun is what a colocated Sim did, advanced in steps of step until every step is over.
type loopRun struct {
	edges   []LoopEdge
	batches []BatchDone
	events  []core.Event
}

func runLoop(t *testing.T, cfg fleetconfig.Config, step time.Duration) loopRun {
	t.Helper()
	s := mustSim(t, cfg)
	var r loopRun
	s.OnEvent(func(e core.Event) { r.events = append(r.events, e) })
	for at := step; at <= 10*time.Minute; at += step {
		s.AdvanceTo(at)
		r.edges = append(r.edges, s.TakeEdges()...)
		r.batches = append(r.batches, s.TakeBatches()...)
		if n := len(r.edges); n > 0 && r.edges[n-1].Kind == Wake && r.edges[n-1].Step == cfg.Workload.Batches {
			return r
		}
	}
	t.Fatalf("the loop did not finish %d steps in 10 minutes: edges %v", cfg.Workload.Batches, r.edges)
	return r
}

// TestColocatedLoopTimeline checks the order and the times of the loop's edges: rollout, eval on
// every second step a handoff after it, sleep a handoff after the last batch, as long as the
// rollout batch (the default training time), and the next rollout a pause after the wake-up;
// each batch arrives a handoff after its start.
func TestColocatedLoopTimeline(t *testing.T) {
	cfg := simtest.ColocatedConfig()
	r := runLoop(t, cfg, 100*time.Millisecond)
	var kinds []string
	for _, e := range r.edges {
		kinds = append(kinds, e.Kind.String())
	}
	want := "rollout_start rollout_end sleep wake " +
		"rollout_start rollout_end eval_start eval_end sleep wake " +
		"rollout_start rollout_end sleep wake " +
		"rollout_start rollout_end eval_start eval_end sleep wake"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("edges\n got %s\nwant %s", got, want)
	}
	var start, end, last time.Duration
	for i, e := range r.edges {
		if i > 0 && e.At < r.edges[i-1].At {
			t.Errorf("edge %v at %s before the one before it", e, e.At)
		}
		switch e.Kind {
		case RolloutStart:
			want := cfg.Workload.StartDelay
			if i > 0 {
				want = r.edges[i-1].At + cfg.Workload.Pause
			}
			if e.At != want {
				t.Errorf("step %d: rollout at %s, want %s", e.Step, e.At, want)
			}
			start = e.At + workload.Handoff
		case RolloutEnd:
			end = e.At
			last = e.At
			b := r.batches[e.Step-1]
			if b.N != e.Step || b.At != e.At {
				t.Errorf("step %d: rollout end %s, batch done %v", e.Step, e.At, b)
			}
			if d := end - start; d < 5*time.Second || d > 12*time.Second {
				t.Errorf("step %d: rollout took %s", e.Step, d)
			}
		case EvalStart:
			if e.At != end+workload.Handoff {
				t.Errorf("step %d: eval at %s, rollout end %s", e.Step, e.At, end)
			}
		case EvalEnd:
			last = e.At
		case Sleep:
			if e.At != last+workload.Handoff {
				t.Errorf("step %d: sleep at %s, last batch end %s", e.Step, e.At, last)
			}
		case Wake:
			if d := e.At - r.edges[i-1].At; d != end-start {
				t.Errorf("step %d: slept %s, rollout took %s", e.Step, d, end-start)
			}
		}
	}
	for i, e := range r.edges {
		if want := stepOfEdge(r.edges, i); e.Step != want {
			t.Errorf("edge %d (%v) in step %d, want %d", i, e.Kind, e.Step, want)
		}
	}
	if len(r.batches) != 4 {
		t.Errorf("batches %v, want the four rollout batches", r.batches)
	}
	// Nothing arrives between a start and its batch.
	arrivals := map[time.Duration]int{}
	for _, e := range r.events {
		if e.Kind == core.EventArrive {
			arrivals[e.At]++
		}
	}
	for _, e := range r.edges {
		if e.Kind == RolloutStart || e.Kind == EvalStart {
			want := cfg.Workload.Prompts * cfg.Workload.Samples
			if e.Kind == EvalStart {
				want /= 4
			}
			if n := arrivals[e.At+workload.Handoff]; n != want {
				t.Errorf("step %d: %d requests arrived a handoff after %v, want %d", e.Step, n, e.Kind, want)
			}
			delete(arrivals, e.At+workload.Handoff)
		}
	}
	if len(arrivals) > 0 {
		t.Errorf("requests arrived at other times: %v", arrivals)
	}

	cfg.Workload.TrainTime = 3 * time.Second
	cfg.Workload.Batches = 1
	r = runLoop(t, cfg, 100*time.Millisecond)
	if n := len(r.edges); r.edges[n-1].At-r.edges[n-2].At != 3*time.Second {
		t.Errorf("with a training time of 3s: edges %v", r.edges)
	}
}

// stepOfEdge counts the rollout starts up to edge i.
func stepOfEdge(edges []LoopEdge, i int) int {
	n := 0
	for _, e := range edges[:i+1] {
		if e.Kind == RolloutStart {
			n++
		}
	}
	return n
}

// TestColocatedEvalBatch checks the eval batches: a quarter of the batch's questions, the same
// held-out ones each time and no training question, arriving a handoff after the eval's start
// and finished by its end, and leaving the rollout batches as they are without them.
func TestColocatedEvalBatch(t *testing.T) {
	cfg := simtest.ColocatedConfig()
	s := mustSim(t, cfg)
	type req struct {
		engine  int
		arrival time.Duration
		finish  time.Duration
	}
	reqs := map[uint64]*req{}
	s.OnEvent(func(e core.Event) {
		if reqs[e.Request] == nil {
			reqs[e.Request] = &req{engine: e.Server*cfg.DP + e.Engine}
		}
		switch e.Kind {
		case core.EventArrive:
			reqs[e.Request].arrival = e.At
		case core.EventFinish:
			reqs[e.Request].finish = e.At
		}
	})
	var edges []LoopEdge
	for at := 100 * time.Millisecond; len(edges) == 0 || edges[len(edges)-1].Kind != Wake || edges[len(edges)-1].Step < 4; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		edges = append(edges, s.TakeEdges()...)
	}
	var evalStart, evalEnd []time.Duration
	for _, e := range edges {
		switch e.Kind {
		case EvalStart:
			evalStart = append(evalStart, e.At+workload.Handoff) // when its batch arrives
		case EvalEnd:
			evalEnd = append(evalEnd, e.At)
		}
	}
	if len(evalStart) != 2 || len(evalEnd) != 2 {
		t.Fatalf("eval edges %v", edges)
	}
	perEval := map[time.Duration]int{}
	engines := map[int]int{}
	for id, r := range reqs {
		if id < workload.EvalIDs {
			continue
		}
		perEval[r.arrival]++
		engines[r.engine]++
		if i := slices.Index(evalStart, r.arrival); i < 0 || r.finish > evalEnd[i] || r.finish == 0 {
			t.Errorf("eval request %d arrived at %s, finished at %s, outside the eval batches %v-%v", id, r.arrival, r.finish, evalStart, evalEnd)
		}
	}
	want := cfg.Workload.Prompts / 4 * cfg.Workload.Samples
	for _, at := range evalStart {
		if perEval[at] != want {
			t.Errorf("eval batch at %s has %d requests, want %d", at, perEval[at], want)
		}
	}
	if len(engines) != 4 {
		t.Errorf("eval requests went to engines %v, want all four", engines)
	}

	// The generator: eval batches ask the same questions, none a training one, and change
	// nothing in the rollout batches.
	w := cfg.Workload
	w.Dataset = 2 * w.Prompts // training questions come back, so a clash would show
	plain := workload.NewGenerator(w, 4, cfg.MaxModelLen, cfg.Seed)
	withEval := workload.NewGenerator(w, 4, cfg.MaxModelLen, cfg.Seed)
	train := map[uint64]bool{}
	var firstEval []core.RequestSpec
	for n := 1; n <= 6; n++ {
		a, b := plain.Batch(n, 0), withEval.Batch(n, 0)
		if !slices.Equal(a, b) {
			t.Fatalf("batch %d differs after eval batches", n)
		}
		for _, rs := range a {
			train[rs.Spec.QuestionSeed] = true
		}
		ev := withEval.Eval(0)
		var specs []core.RequestSpec
		for _, rs := range ev {
			if train[rs.Spec.QuestionSeed] {
				t.Fatalf("eval batch asks training question %x", rs.Spec.QuestionSeed)
			}
			specs = append(specs, rs.Spec)
		}
		if firstEval == nil {
			firstEval = specs
			continue
		}
		for i := range specs {
			if specs[i].QuestionSeed != firstEval[i].QuestionSeed || specs[i].PromptLen != firstEval[i].PromptLen {
				t.Fatalf("eval batch %d asks other questions than the first", n)
			}
		}
	}
	w.EvalPrompts = 3
	if got := len(workload.NewGenerator(w, 4, cfg.MaxModelLen, cfg.Seed).Eval(0)); got != 3*w.Samples {
		t.Errorf("eval batch of 3 prompts has %d requests", got)
	}
}

// TestColocatedSameSeedSameEvents: the loop is as repeatable as the rest of the simulation,
// however the simulation is advanced.
func TestColocatedSameSeedSameEvents(t *testing.T) {
	cfg := simtest.ColocatedConfig()
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: 40 * time.Second, Server: 1}}
	a := runLoop(t, cfg, 100*time.Millisecond)
	b := runLoop(t, cfg, 100*time.Millisecond)
	if !slices.Equal(a.edges, b.edges) || !slices.Equal(a.events, b.events) {
		t.Fatal("same seed, different runs")
	}
	c := runLoop(t, cfg, 7*time.Millisecond)
	if !slices.Equal(a.edges, c.edges) {
		t.Fatalf("advanced in other steps, different edges:\n%v\n%v", a.edges, c.edges)
	}
	byEngine := func(l []core.Event) []core.Event {
		return slices.SortedStableFunc(slices.Values(l), func(x, y core.Event) int {
			return (x.Server*1000 + x.Engine) - (y.Server*1000 + y.Engine)
		})
	}
	if !slices.Equal(byEngine(a.events), byEngine(c.events)) {
		t.Fatal("advanced in other steps, different events")
	}
	cfg.Seed++
	if d := runLoop(t, cfg, 100*time.Millisecond); slices.Equal(a.edges, d.edges) {
		t.Fatal("different seeds, same edges")
	}
}

// TestColocatedRestartWhileAsleep: a server restarted during the training time comes back awake
// and empty, and the loop goes on.
func TestColocatedRestartWhileAsleep(t *testing.T) {
	cfg := simtest.ColocatedConfig()
	cfg.Workload.EvalEvery = 0
	cfg.Workload.Batches = 2
	s := mustSim(t, cfg)
	var sleepAt time.Duration
	for at := 100 * time.Millisecond; sleepAt == 0; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.TakeEdges() {
			if e.Kind == Sleep {
				sleepAt = e.At
			}
		}
	}
	s.restarts = []restartEvent{{sleepAt + time.Second, 0}}
	s.AdvanceTo(sleepAt + 2*time.Second)
	for _, e := range s.Servers[0].Engines {
		if e.Asleep() {
			t.Error("restarted engine still asleep")
		}
	}
	for _, e := range s.Servers[1].Engines {
		if !e.Asleep() {
			t.Error("engine of the other server awake during the training time")
		}
	}
	var woken []int
	for at := s.Now(); len(woken) < 2 && at < 10*time.Minute; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.TakeEdges() {
			if e.Kind == Wake {
				woken = append(woken, e.Step)
			}
		}
	}
	if !slices.Equal(woken, []int{1, 2}) {
		t.Errorf("steps woken from %v, want 1 and 2", woken)
	}
	if tot := s.Totals(); tot["restarts"] != 1 || tot["requests_lost"] != 0 {
		t.Errorf("restarts %v, requests lost %v; want one restart that lost nothing", tot["restarts"], tot["requests_lost"])
	}
}

func TestColocatedConfigValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(*workload.WorkloadConfig)
		want   string
	}{
		{"poisson", func(w *workload.WorkloadConfig) { w.Colocated = true; w.Kind = workload.WorkloadPoisson }, `the colocated loop needs the "grpo" workload, got "poisson"`},
		{"train time alone", func(w *workload.WorkloadConfig) { w.TrainTime = time.Second }, "workload train time 1s needs the colocated loop"},
		{"eval alone", func(w *workload.WorkloadConfig) { w.EvalEvery = 2 }, "workload eval every 2 needs the colocated loop"},
		{"negative train time", func(w *workload.WorkloadConfig) { w.Colocated = true; w.TrainTime = -time.Second }, "workload train time must not be negative, got -1s"},
		{"negative eval every", func(w *workload.WorkloadConfig) { w.Colocated = true; w.EvalEvery = -1 }, "workload eval every must be 0 (no eval batches) or a number of steps, got -1"},
		{"negative eval prompts", func(w *workload.WorkloadConfig) { w.Colocated = true; w.EvalPrompts = -1 }, "workload eval prompts must be 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fleetconfig.DefaultConfig()
			tt.change(&cfg.Workload)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := simtest.ColocatedConfig().Validate(); err != nil {
		t.Fatalf("colocated config invalid: %v", err)
	}
}
