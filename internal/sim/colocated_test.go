package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vllmstat/vllmstat/internal/clock"
)

// colocatedConfig is the demo's fleet in the colocated loop: 2 servers x 2 engines, an eval
// batch every second step, four steps.
func colocatedConfig() Config {
	cfg := DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 2
	cfg.Workload.Batches = 4
	return cfg
}

// loopRun is what a colocated Sim did, advanced in steps of step until every step is over.
type loopRun struct {
	edges   []LoopEdge
	batches []BatchDone
	events  []Event
}

func runLoop(t *testing.T, cfg Config, step time.Duration) loopRun {
	t.Helper()
	s := mustSim(t, cfg)
	var r loopRun
	s.OnEvent(func(e Event) { r.events = append(r.events, e) })
	for at := step; at <= 10*time.Minute; at += step {
		s.AdvanceTo(at)
		r.edges = append(r.edges, s.takeEdges()...)
		r.batches = append(r.batches, s.takeBatches()...)
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
	cfg := colocatedConfig()
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
			start = e.At + handoff
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
			if e.At != end+handoff {
				t.Errorf("step %d: eval at %s, rollout end %s", e.Step, e.At, end)
			}
		case EvalEnd:
			last = e.At
		case Sleep:
			if e.At != last+handoff {
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
		if e.Kind == EventArrive {
			arrivals[e.At]++
		}
	}
	for _, e := range r.edges {
		if e.Kind == RolloutStart || e.Kind == EvalStart {
			want := cfg.Workload.Prompts * cfg.Workload.Samples
			if e.Kind == EvalStart {
				want /= 4
			}
			if n := arrivals[e.At+handoff]; n != want {
				t.Errorf("step %d: %d requests arrived a handoff after %v, want %d", e.Step, n, e.Kind, want)
			}
			delete(arrivals, e.At+handoff)
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
	cfg := colocatedConfig()
	s := mustSim(t, cfg)
	type req struct {
		engine  int
		arrival time.Duration
		finish  time.Duration
	}
	reqs := map[uint64]*req{}
	s.OnEvent(func(e Event) {
		if reqs[e.Request] == nil {
			reqs[e.Request] = &req{engine: e.Server*cfg.DP + e.Engine}
		}
		switch e.Kind {
		case EventArrive:
			reqs[e.Request].arrival = e.At
		case EventFinish:
			reqs[e.Request].finish = e.At
		}
	})
	var edges []LoopEdge
	for at := 100 * time.Millisecond; len(edges) == 0 || edges[len(edges)-1].Kind != Wake || edges[len(edges)-1].Step < 4; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		edges = append(edges, s.takeEdges()...)
	}
	var evalStart, evalEnd []time.Duration
	for _, e := range edges {
		switch e.Kind {
		case EvalStart:
			evalStart = append(evalStart, e.At+handoff) // when its batch arrives
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
		if id < evalIDs {
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
	plain := newGenerator(w, 4, cfg.MaxModelLen, cfg.Seed)
	withEval := newGenerator(w, 4, cfg.MaxModelLen, cfg.Seed)
	train := map[uint64]bool{}
	var firstEval []RequestSpec
	for n := 1; n <= 6; n++ {
		a, b := plain.batch(n, 0), withEval.batch(n, 0)
		if !slices.Equal(a, b) {
			t.Fatalf("batch %d differs after eval batches", n)
		}
		for _, rs := range a {
			train[rs.spec.QuestionSeed] = true
		}
		ev := withEval.eval(0)
		var specs []RequestSpec
		for _, rs := range ev {
			if train[rs.spec.QuestionSeed] {
				t.Fatalf("eval batch asks training question %x", rs.spec.QuestionSeed)
			}
			specs = append(specs, rs.spec)
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
	if got := len(newGenerator(w, 4, cfg.MaxModelLen, cfg.Seed).eval(0)); got != 3*w.Samples {
		t.Errorf("eval batch of 3 prompts has %d requests", got)
	}
}

// engineGauges are one engine's children of vllm:engine_sleep_state and its load gauges.
type engineGauges struct {
	awake, offloaded, discarded, running, waiting, kv float64
	hasSleep                                          bool
}

// gaugesOf reads the gauges of the engine labelled engine from a parsed page.
func gaugesOf(t *testing.T, fams map[string]*dto.MetricFamily, engine string) engineGauges {
	t.Helper()
	var g engineGauges
	value := func(name, state string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
		for _, m := range f.Metric {
			var eng, st string
			for _, l := range m.Label {
				switch l.GetName() {
				case "engine":
					eng = l.GetValue()
				case "sleep_state":
					st = l.GetValue()
				}
			}
			if eng == engine && st == state {
				return m.Gauge.GetValue(), true
			}
		}
		t.Fatalf("%s has no child for engine %s %s", name, engine, state)
		return 0, false
	}
	g.awake, g.hasSleep = value("vllm:engine_sleep_state", "awake")
	if g.hasSleep {
		g.offloaded, _ = value("vllm:engine_sleep_state", "weights_offloaded")
		g.discarded, _ = value("vllm:engine_sleep_state", "discard_all")
	}
	g.running, _ = value("vllm:num_requests_running", "")
	g.waiting, _ = value("vllm:num_requests_waiting", "")
	if _, ok := fams["vllm:kv_cache_usage_perc"]; ok {
		g.kv, _ = value("vllm:kv_cache_usage_perc", "")
	} else {
		g.kv, _ = value("vllm:gpu_cache_usage_perc", "")
	}
	return g
}

// TestColocatedPages follows the pages through the loop: the sleep family is on every page of
// 0.20, awake = 1 while the engines are awake and weights_offloaded = 1 while they sleep, when
// nothing runs or waits and the KV cache is empty; the counters keep their values over the
// sleep; and after the wake-up the prefix cache starts empty.
func TestColocatedPages(t *testing.T) {
	cfg := colocatedConfig()
	s := mustSim(t, cfg)
	page := func() map[string]*dto.MetricFamily { return parsePage(t, s.Page(1, testStart)) }
	check := func(when string, asleep bool) {
		t.Helper()
		fams := page()
		busy := 0.0
		for _, eng := range []string{"0", "1"} {
			g := gaugesOf(t, fams, eng)
			if !g.hasSleep {
				t.Fatalf("%s: no vllm:engine_sleep_state on the page", when)
			}
			wantAwake, wantOff := 1.0, 0.0
			if asleep {
				wantAwake, wantOff = 0, 1
			}
			if g.awake != wantAwake || g.offloaded != wantOff || g.discarded != 0 {
				t.Errorf("%s: engine %s awake %v weights_offloaded %v discard_all %v", when, eng, g.awake, g.offloaded, g.discarded)
			}
			if asleep && (g.running != 0 || g.waiting != 0 || g.kv != 0) {
				t.Errorf("%s: sleeping engine %s has running %v waiting %v kv %v", when, eng, g.running, g.waiting, g.kv)
			}
			busy += g.running + g.waiting
		}
		if !asleep && strings.HasPrefix(when, "mid") && busy == 0 {
			t.Errorf("%s: nothing running or waiting", when)
		}
	}
	check("before the first batch", false)
	var edges []LoopEdge
	for at := 100 * time.Millisecond; len(edges) < 10; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.takeEdges() {
			edges = append(edges, e)
			switch e.Kind {
			case RolloutStart, EvalStart:
				s.AdvanceTo(e.At + 2*time.Second)
				check("mid "+e.Kind.String(), false)
			case Sleep:
				before := simTotalsFromPages(t, s)
				s.AdvanceTo(e.At + time.Second)
				check("asleep", true)
				for _, e := range s.engines {
					if e.pool.numUsed() != 0 || len(e.pool.cached) != 0 {
						t.Errorf("sleeping engine keeps %d blocks, %d cached", e.pool.numUsed(), len(e.pool.cached))
					}
				}
				compareTotals(t, "counters over the sleep", simTotalsFromPages(t, s), before)
			case Wake:
				check("woken", false)
			}
		}
	}

	// Without the loop the page has the sleep family too, awake, as vLLM serves it, but none of
	// the loop's (the sleep resources, the RL families); a release without it (0.10) shows none
	// in the loop either, but the same empty engines while they sleep.
	plain := DefaultConfig()
	plain.DP = 2
	fams := parsePage(t, mustSim(t, plain).Page(0, testStart))
	if g := gaugesOf(t, fams, "1"); !g.hasSleep || g.awake != 1 || g.offloaded != 0 || g.discarded != 0 {
		t.Errorf("a page outside the colocated loop shows the sleep state %+v", g)
	}
	for name := range fams {
		if strings.Contains(name, "sleep_resource") || strings.Contains(name, "fully_awake") || strings.Contains(name, "rl_weight") {
			t.Errorf("a page outside the colocated loop has %s", name)
		}
	}
	cfg.Version = "0.10"
	s = mustSim(t, cfg)
	for at := 100 * time.Millisecond; ; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		if slices.ContainsFunc(s.takeEdges(), func(e LoopEdge) bool { return e.Kind == Sleep }) {
			break
		}
	}
	fams = page()
	for _, eng := range []string{"0", "1"} {
		if g := gaugesOf(t, fams, eng); g.hasSleep || g.running != 0 || g.waiting != 0 || g.kv != 0 {
			t.Errorf("0.10 page of a sleeping engine %s: %+v", eng, g)
		}
	}
}

// TestColocatedSleepFamilyLayout checks the family's place and lines on an idle 0.20 page: after
// num_requests_waiting and its split by reason, where vLLM registers it, its children state by
// state, as vLLM creates them, and the sleep resource families after it.
func TestColocatedSleepFamilyLayout(t *testing.T) {
	cfg := goldenConfig("0.20")
	cfg.Workload.Colocated = true
	page := string(mustSim(t, cfg).Page(0, testStart))
	const m = `model_name="Qwen/Qwen3-1.7B"`
	want := `vllm:num_requests_waiting_by_reason{engine="1",` + m + `,reason="deferred"} 0.0
# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",` + m + `,sleep_state="awake"} 1.0
vllm:engine_sleep_state{engine="1",` + m + `,sleep_state="awake"} 1.0
vllm:engine_sleep_state{engine="0",` + m + `,sleep_state="weights_offloaded"} 0.0
vllm:engine_sleep_state{engine="1",` + m + `,sleep_state="weights_offloaded"} 0.0
vllm:engine_sleep_state{engine="0",` + m + `,sleep_state="discard_all"} 0.0
vllm:engine_sleep_state{engine="1",` + m + `,sleep_state="discard_all"} 0.0
# HELP vllm:engine_sleep_resource_state `
	if !strings.Contains(page, want) {
		t.Errorf("page lacks\n%s\n", want)
	}
	// Apart from the loop's families, whose children come with the first sleep and the first
	// load, the page is the one without the loop.
	cfg.Workload.Colocated = false
	plain := string(mustSim(t, cfg).Page(0, testStart))
	i := strings.Index(page, "# HELP vllm:engine_sleep_resource_state")
	j := strings.Index(page, "# HELP vllm:kv_cache_usage_perc")
	k := strings.Index(page, "# HELP vllm:rl_weight_update_total")
	l := strings.Index(page, "# HELP http_requests_total")
	if i < 0 || j < i || k < j || l < k {
		t.Fatalf("the loop's families are not where vLLM lists them:\n%s", page)
	}
	loopFams := page[i:j] + page[k:l]
	if page[:i]+page[j:k]+page[l:] != plain {
		t.Error("the colocated page differs from the plain one outside the loop's families")
	}
	for _, line := range strings.Split(strings.TrimSpace(loopFams), "\n") {
		if !strings.HasPrefix(line, "# ") {
			t.Errorf("an idle page of the loop has a child of the loop's families: %s", line)
		}
	}
}

// TestColocatedSameSeedSameEvents: the loop is as repeatable as the rest of the simulation,
// however the simulation is advanced.
func TestColocatedSameSeedSameEvents(t *testing.T) {
	cfg := colocatedConfig()
	cfg.Faults = []Fault{{Kind: FaultRestart, At: 40 * time.Second, Server: 1}}
	a := runLoop(t, cfg, 100*time.Millisecond)
	b := runLoop(t, cfg, 100*time.Millisecond)
	if !slices.Equal(a.edges, b.edges) || !slices.Equal(a.events, b.events) {
		t.Fatal("same seed, different runs")
	}
	c := runLoop(t, cfg, 7*time.Millisecond)
	if !slices.Equal(a.edges, c.edges) {
		t.Fatalf("advanced in other steps, different edges:\n%v\n%v", a.edges, c.edges)
	}
	byEngine := func(l []Event) []Event {
		return slices.SortedStableFunc(slices.Values(l), func(x, y Event) int {
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
	cfg := colocatedConfig()
	cfg.Workload.EvalEvery = 0
	cfg.Workload.Batches = 2
	s := mustSim(t, cfg)
	var sleepAt time.Duration
	for at := 100 * time.Millisecond; sleepAt == 0; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.takeEdges() {
			if e.Kind == Sleep {
				sleepAt = e.At
			}
		}
	}
	s.restarts = []restartEvent{{sleepAt + time.Second, 0}}
	s.AdvanceTo(sleepAt + 2*time.Second)
	for _, e := range s.servers[0].engines {
		if e.Asleep() {
			t.Error("restarted engine still asleep")
		}
	}
	for _, e := range s.servers[1].engines {
		if !e.Asleep() {
			t.Error("engine of the other server awake during the training time")
		}
	}
	var woken []int
	for at := s.Now(); len(woken) < 2 && at < 10*time.Minute; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.takeEdges() {
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
		change func(*WorkloadConfig)
		want   string
	}{
		{"poisson", func(w *WorkloadConfig) { w.Colocated = true; w.Kind = WorkloadPoisson }, `the colocated loop needs the "grpo" workload, got "poisson"`},
		{"train time alone", func(w *WorkloadConfig) { w.TrainTime = time.Second }, "workload train time 1s needs the colocated loop"},
		{"eval alone", func(w *WorkloadConfig) { w.EvalEvery = 2 }, "workload eval every 2 needs the colocated loop"},
		{"negative train time", func(w *WorkloadConfig) { w.Colocated = true; w.TrainTime = -time.Second }, "workload train time must not be negative, got -1s"},
		{"negative eval every", func(w *WorkloadConfig) { w.Colocated = true; w.EvalEvery = -1 }, "workload eval every must be 0 (no eval batches) or a number of steps, got -1"},
		{"negative eval prompts", func(w *WorkloadConfig) { w.Colocated = true; w.EvalPrompts = -1 }, "workload eval prompts must be 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg.Workload)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := colocatedConfig().Validate(); err != nil {
		t.Fatalf("colocated config invalid: %v", err)
	}
}

// TestFleetDeliversLoopEdges drives a colocated fleet with a fake wall clock: it delivers the
// Sim's edges in order, each once the served pages show it (asleep after a sleep, awake after a
// wake-up), and a fleet outside the loop has no edge channel.
func TestFleetDeliversLoopEdges(t *testing.T) {
	clk := clock.NewFake(testStart)
	cfg := fastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 1
	cfg.Workload.Batches = 2
	f := startFleet(t, cfg)
	var got []LoopEdge
	for range 200 { // 10 s of wall time, 200 s simulated
		waitTimers(t, clk, 1)
		for len(f.Edges()) > 0 {
			e := <-f.Edges()
			got = append(got, e)
			if e.Kind != Sleep && e.Kind != Wake {
				continue
			}
			g := gaugesOf(t, parsePage(t, []byte(mustGet(t, f.URLs()[0]))), "1")
			if want := map[LoopEdgeKind]float64{Sleep: 0, Wake: 1}[e.Kind]; g.awake != want {
				t.Errorf("after %v of step %d the page shows awake %v", e.Kind, e.Step, g.awake)
			}
		}
		clk.Advance(cfg.Tick)
	}
	want := runLoop(t, cfg, 50*time.Millisecond).edges
	if !slices.Equal(got, want) {
		t.Errorf("fleet delivered\n%v\nthe simulation has\n%v", got, want)
	}

	cfg.Workload.Colocated, cfg.Workload.EvalEvery = false, 0
	cfg.Clock = nil
	if f := startFleet(t, cfg); f.Edges() != nil {
		t.Error("a fleet outside the colocated loop has an edge channel")
	}
}
