package fleetmodel

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// syncRun is what a Sim that syncs weights did, advanced in steps to a time: its raw trace per
// engine (index in Sim.engines), the publishes and edges as a Fleet delivers them, and the
// ground truth at the end.
type syncRun struct {
	s         *Sim
	trace     [][]core.TraceEvent
	publishes []core.Publish
	edges     []LoopEdge
	batches   []BatchDone
	truth     core.GroundTruth
}

func runSync(t *testing.T, cfg fleetconfig.Config, until, step time.Duration) *syncRun {
	t.Helper()
	r := &syncRun{s: mustSim(t, cfg)}
	r.trace = make([][]core.TraceEvent, len(r.s.Engines))
	for i, e := range r.s.Engines {
		e.Trace = func(ev core.TraceEvent) { r.trace[i] = append(r.trace[i], ev) }
	}
	for at := step; ; at += step {
		at = min(at, until)
		r.s.AdvanceTo(at)
		r.publishes = append(r.publishes, r.s.TakePublishes()...)
		r.edges = append(r.edges, r.s.TakeEdges()...)
		r.batches = append(r.batches, r.s.TakeBatches()...)
		if at == until {
			break
		}
	}
	r.truth = r.s.GroundTruth()
	return r
}

func sumTime(ts [core.NumStates]time.Duration) time.Duration {
	var d time.Duration
	for _, x := range ts {
		d += x
	}
	return d
}

// checkAddsUp checks that every engine's time adds up: over the states to the time it covers,
// over the steps to its totals, and within each closed step to the step's length; and its
// tokens over the steps to its totals.
func checkAddsUp(t *testing.T, g core.GroundTruth) {
	t.Helper()
	for _, e := range g.Engines {
		if e.Through < g.At {
			t.Errorf("engine %d/%d: covered up to %s, the simulation is at %s", e.Server, e.Engine, e.Through, g.At)
		}
		if got := sumTime(e.Time); got != e.Through {
			t.Errorf("engine %d/%d: states add up to %s, want %s", e.Server, e.Engine, got, e.Through)
		}
		if len(e.Steps) != len(g.StepEnds)+1 {
			t.Fatalf("engine %d/%d: %d steps, %d step ends", e.Server, e.Engine, len(e.Steps), len(g.StepEnds))
		}
		var byState [core.NumStates]time.Duration
		var gen, stale int64
		start := time.Duration(0)
		for i, st := range e.Steps {
			for k, d := range st.Time {
				byState[k] += d
			}
			gen += st.GenerationTokens
			stale += st.StaleTokens
			if st.StaleTokens > st.GenerationTokens {
				t.Errorf("engine %d/%d step %d: %d stale of %d tokens", e.Server, e.Engine, i+1, st.StaleTokens, st.GenerationTokens)
			}
			if i < len(g.StepEnds) {
				if got, want := sumTime(st.Time), g.StepEnds[i]-start; got != want {
					t.Errorf("engine %d/%d step %d: states add up to %s, the step lasted %s", e.Server, e.Engine, i+1, got, want)
				}
				start = g.StepEnds[i]
			}
		}
		if byState != e.Time || gen != e.GenerationTokens || stale != e.StaleTokens {
			t.Errorf("engine %d/%d: steps add up to %v, %d tokens, %d stale; totals %v, %d, %d",
				e.Server, e.Engine, byState, gen, stale, e.Time, e.GenerationTokens, e.StaleTokens)
		}
	}
}

// TestGroundTruthAddsUp runs each kind of loop, with a restart in it, and checks that every
// engine's ground truth adds up (checkAddsUp), that the tokens it counts are the pages'
// counters' true increase, and that it does not depend on how the simulation was advanced.
func TestGroundTruthAddsUp(t *testing.T) {
	sglang := simtest.AsyncConfig()
	sglang.Engine = fleetconfig.EngineSGLang
	poisson := simtest.AsyncConfig()
	poisson.Workload.Kind = workload.WorkloadPoisson
	plain := fleetconfig.DefaultConfig()
	plain.DP = 2
	for _, tt := range []struct {
		name string
		cfg  fleetconfig.Config
	}{
		{"colocated", simtest.SyncedColocatedConfig()},
		{"async", simtest.AsyncConfig()},
		{"async sglang", sglang},
		{"async poisson", poisson},
		{"grpo", plain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: 23 * time.Second, Server: 1}}
			const until = 61 * time.Second
			r := runSync(t, cfg, until, 100*time.Millisecond)
			g := r.truth
			checkAddsUp(t, g)
			if len(g.StepEnds) < 2 {
				t.Fatalf("only %d steps ended by %s", len(g.StepEnds), until)
			}
			var gen int64
			for _, e := range g.Engines {
				gen += e.GenerationTokens
			}
			if tot := r.s.Totals(); cfg.Engine == fleetconfig.EngineVLLM && float64(gen) != tot["generation_tokens"] {
				t.Errorf("ground truth has %d tokens generated, the totals %v", gen, tot["generation_tokens"])
			}
			if again := runSync(t, cfg, until, 7*time.Millisecond).truth; !reflect.DeepEqual(g, again) {
				t.Errorf("advanced in other steps, a different ground truth:\n%+v\n%+v", g, again)
			}
		})
	}
}

// TestGroundTruthState: an engine's State is where its time goes next: whenever the time an
// engine gained between two ground truths is in one state, it is the earlier truth's State; and
// a colocated vLLM engine is seen in every state the loop has.
func TestGroundTruthState(t *testing.T) {
	cfg := simtest.SyncedColocatedConfig()
	s := mustSim(t, cfg)
	seen := map[core.State]bool{}
	prev := s.GroundTruth()
	for at := 50 * time.Millisecond; at <= 40*time.Second; at += 50 * time.Millisecond {
		s.AdvanceTo(at)
		g := s.GroundTruth()
		for i, e := range g.Engines {
			seen[e.State] = true
			var in []core.State
			for st := range core.NumStates {
				if e.Time[st] > prev.Engines[i].Time[st] {
					in = append(in, st)
				}
			}
			if len(in) == 1 && in[0] != prev.Engines[i].State {
				t.Fatalf("engine %d/%d: from %s to %s all its time is %s, its state at %s was %s",
					e.Server, e.Engine, prev.Engines[i].Through, e.Through, in[0], prev.Engines[i].Through, prev.Engines[i].State)
			}
		}
		prev = g
	}
	for _, st := range []core.State{core.StateGenerating, core.StateIdle, core.StateAsleep, core.StateWaking, core.StateLoadingWeights} {
		if !seen[st] {
			t.Errorf("no engine was ever %s", st)
		}
	}
}

// staleFromTrace recomputes each engine's stale tokens, in all and per step, from its raw
// trace and the publishes: a token is stale when a version newer than the engine's was
// published at or before the end of the iteration that generated it; its step is the first
// whose end is at or after that.
func staleFromTrace(trace [][]core.TraceEvent, publishes []core.Publish, ends []time.Duration) (total []int64, perStep [][]int64) {
	total = make([]int64, len(trace))
	perStep = make([][]int64, len(trace))
	for i, evs := range trace {
		perStep[i] = make([]int64, len(ends)+1)
		version := snap.NoVersion
		for _, ev := range evs {
			switch ev.Kind {
			case core.TraceLoaded:
				version = ev.N
			case core.TraceRestart:
				version = snap.NoVersion
			case core.TraceTokens:
				latest := snap.NoVersion
				for _, p := range publishes {
					if p.At <= ev.At {
						latest = max(latest, p.Version)
					}
				}
				if latest > version {
					total[i] += int64(ev.N)
					step := len(ends)
					for j, end := range ends {
						if ev.At <= end {
							step = j
							break
						}
					}
					perStep[i][step] += int64(ev.N)
				}
			}
		}
	}
	return total, perStep
}

// TestAsyncLoop follows the async loop: the trainer publishes version 0 at the start delay and
// version k every step time after the initial sync; each engine pauses a delay after each
// publish of its own, below a handoff (the laggard the lag more), loads for the load time a
// handoff later and resumes with the version. Its stale tokens are the ones a recount from the
// raw trace finds, in all and per step; the laggard has the most, and every engine some.
func TestAsyncLoop(t *testing.T) {
	cfg := simtest.AsyncConfig()
	w := cfg.Workload
	start := w.StartDelay + workload.Handoff + w.LoadTime
	const steps = 4
	until := start + steps*w.StepTime + time.Second
	r := runSync(t, cfg, until, 100*time.Millisecond)
	g := r.truth
	checkAddsUp(t, g)

	wantPub := []core.Publish{{Version: 0, At: w.StartDelay}}
	var wantEnds []time.Duration
	for k := 1; k <= steps; k++ {
		at := start + time.Duration(k)*w.StepTime
		wantPub = append(wantPub, core.Publish{Version: k, At: at})
		wantEnds = append(wantEnds, at)
	}
	if !slices.Equal(r.publishes, wantPub) || !slices.Equal(g.Publishes, wantPub) {
		t.Fatalf("publishes %v (ground truth %v), want %v", r.publishes, g.Publishes, wantPub)
	}
	if !slices.Equal(g.StepEnds, wantEnds) {
		t.Fatalf("step ends %v, want %v", g.StepEnds, wantEnds)
	}
	if len(r.batches) < steps-1 {
		t.Errorf("only %d batches in %d steps: the engines do not generate continuously", len(r.batches), steps)
	}

	laggard := r.s.Async.Laggard
	stale, perStep := staleFromTrace(r.trace, r.publishes, g.StepEnds)
	for i, e := range g.Engines {
		// Versions: 0 for every engine at once, then each at its own delay.
		delay := r.s.SyncDelay(i)
		if i == laggard && delay < w.Lag || i != laggard && delay >= workload.Handoff {
			t.Errorf("engine %d: delay %s (laggard %d)", i, delay, laggard)
		}
		want := []core.VersionChange{{Version: 0, At: w.StartDelay + workload.Handoff + w.LoadTime}}
		for _, p := range wantPub[1:] {
			if end := p.At + delay + workload.Handoff + w.LoadTime; end <= until {
				want = append(want, core.VersionChange{Version: p.Version, At: end})
			}
		}
		// An iteration in flight when the pause is due delays the pause to its end.
		if len(e.Versions) != len(want) {
			t.Fatalf("engine %d: versions %v, want about %v", i, e.Versions, want)
		}
		for j, v := range e.Versions {
			if v.Version != want[j].Version || v.At < want[j].At || v.At > want[j].At+100*time.Millisecond {
				t.Errorf("engine %d: version %v, want about %v", i, v, want[j])
			}
		}
		// Each full step: one load, one pause of a handoff before it, no sleep.
		for k := 1; k < steps; k++ {
			st := e.Steps[k]
			if st.Time[core.StateLoadingWeights] != w.LoadTime || st.Time[core.StatePaused] != workload.Handoff {
				t.Errorf("engine %d step %d: loading %s, paused %s; want %s and %s", i, k+1,
					st.Time[core.StateLoadingWeights], st.Time[core.StatePaused], w.LoadTime, workload.Handoff)
			}
			if st.Time[core.StateAsleep]+st.Time[core.StateWaking] != 0 || st.Time[core.StateGenerating] < w.StepTime/2 {
				t.Errorf("engine %d step %d: %v", i, k+1, st.Time)
			}
		}
		if e.StaleTokens != stale[i] {
			t.Errorf("engine %d: %d stale tokens, the trace has %d", i, e.StaleTokens, stale[i])
		}
		for k, st := range e.Steps {
			if st.StaleTokens != perStep[i][k] {
				t.Errorf("engine %d step %d: %d stale tokens, the trace has %d", i, k+1, st.StaleTokens, perStep[i][k])
			}
		}
		if e.StaleTokens == 0 {
			t.Errorf("engine %d generated no stale token", i)
		}
		if i != laggard && e.StaleTokens >= g.Engines[laggard].StaleTokens {
			t.Errorf("engine %d has %d stale tokens, the laggard %d only %d", i, e.StaleTokens, laggard, g.Engines[laggard].StaleTokens)
		}
	}
	// The first step's tokens were all generated on the initial policy, the latest one.
	for i, e := range g.Engines {
		if e.Steps[0].StaleTokens != 0 || e.Steps[0].GenerationTokens == 0 {
			t.Errorf("engine %d step 1: %d stale of %d tokens", i, e.Steps[0].StaleTokens, e.Steps[0].GenerationTokens)
		}
	}

	cfg.Seed++
	if other := mustSim(t, cfg); other.Async.Laggard == laggard && other.SyncDelay(0) == r.s.SyncDelay(0) {
		t.Error("another seed, the same laggard and delays")
	}
}

// TestColocatedWeightSync follows the colocated loop with a wake-up and a load that take time:
// version 0 is loaded before the first rollout, and version n, published at the end of step n's
// training, between the wake-up of the weights and the KV cache's. Every step's end is its Wake;
// each engine sleeps through the training and the weights' wake-up, loads for the load time,
// wakes for the KV cache's, and generates nothing stale.
func TestColocatedWeightSync(t *testing.T) {
	cfg := simtest.SyncedColocatedConfig()
	w := cfg.Workload
	r := runSync(t, cfg, 3*time.Minute, 100*time.Millisecond)
	g := r.truth
	checkAddsUp(t, g)

	var wakes, sleeps, starts []time.Duration
	for _, e := range r.edges {
		switch e.Kind {
		case Wake:
			wakes = append(wakes, e.At)
		case Sleep:
			sleeps = append(sleeps, e.At)
		case RolloutStart:
			starts = append(starts, e.At)
		}
	}
	if len(wakes) != w.Batches || len(sleeps) != w.Batches {
		t.Fatalf("edges %v", r.edges)
	}
	if !slices.Equal(g.StepEnds, wakes) {
		t.Errorf("step ends %v, wakes %v", g.StepEnds, wakes)
	}
	if starts[0] != w.StartDelay+w.LoadTime {
		t.Errorf("first rollout at %s, want after the initial load, at %s", starts[0], w.StartDelay+w.LoadTime)
	}
	wantPub := []core.Publish{{Version: 0, At: w.StartDelay}}
	for n, at := range sleeps {
		if wakes[n]-at != w.TrainTime+2*w.WakeTime+w.LoadTime {
			t.Errorf("step %d: slept at %s, woke at %s", n+1, at, wakes[n])
		}
		wantPub = append(wantPub, core.Publish{Version: n + 1, At: at + w.TrainTime})
	}
	if !slices.Equal(r.publishes, wantPub) {
		t.Errorf("publishes %v, want %v", r.publishes, wantPub)
	}
	for i, e := range g.Engines {
		for n, st := range e.Steps[:w.Batches] {
			load := w.LoadTime
			if n == 0 {
				load *= 2 // the initial load too
			}
			if st.Time[core.StateAsleep] != w.TrainTime+w.WakeTime || st.Time[core.StateWaking] != w.WakeTime ||
				st.Time[core.StateLoadingWeights] != load || st.Time[core.StatePaused] != 0 || st.Time[core.StateGenerating] == 0 {
				t.Errorf("engine %d step %d: %v", i, n+1, st.Time)
			}
		}
		if e.StaleTokens != 0 || e.GenerationTokens == 0 {
			t.Errorf("engine %d: %d stale of %d tokens", i, e.StaleTokens, e.GenerationTokens)
		}
		want := []core.VersionChange{{Version: 0, At: w.StartDelay + w.LoadTime}}
		for n, at := range sleeps {
			want = append(want, core.VersionChange{Version: n + 1, At: at + w.TrainTime + w.WakeTime + w.LoadTime})
		}
		if !slices.Equal(e.Versions, want) {
			t.Errorf("engine %d: versions %v, want %v", i, e.Versions, want)
		}
	}
}

// TestColocatedRestartLosesTheVersion restarts a server at the start of a step's rollout, before
// its batch arrives: its engines lose their version, generate the batch's tokens stale (the
// trainer's latest version is the one they lost), and load the step's version at the next
// wake-up (awake, they pause for it, all of which is loading).
func TestColocatedRestartLosesTheVersion(t *testing.T) {
	cfg := simtest.SyncedColocatedConfig()
	cfg.Workload.EvalEvery = 0
	s := mustSim(t, cfg)
	var rollout time.Duration
	for at := 100 * time.Millisecond; rollout == 0; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.TakeEdges() {
			if e.Kind == RolloutStart && e.Step == 2 {
				rollout = e.At
			}
		}
	}
	restart := rollout + workload.Handoff/2
	s.restarts = []restartEvent{{restart, 1}}
	s.AdvanceTo(3 * time.Minute)
	g := s.GroundTruth()
	checkAddsUp(t, g)
	for _, e := range g.Engines {
		if e.Server == 0 {
			if e.StaleTokens != 0 {
				t.Errorf("engine %d/%d of the server that kept running: %d stale tokens", e.Server, e.Engine, e.StaleTokens)
			}
			continue
		}
		vs := e.Versions
		if len(vs) != 5 || vs[2].Version != snap.NoVersion || vs[2].At != restart || vs[3].Version != 2 {
			t.Errorf("engine %d/%d: versions %v", e.Server, e.Engine, vs)
		}
		if e.StaleTokens == 0 || e.Steps[1].StaleTokens != e.StaleTokens {
			t.Errorf("engine %d/%d: %d stale tokens, %d in step 2", e.Server, e.Engine, e.StaleTokens, e.Steps[1].StaleTokens)
		}
		if p := e.Steps[1].Time[core.StatePaused]; p != 0 {
			t.Errorf("engine %d/%d: paused %s in step 2; the load's pause is all loading", e.Server, e.Engine, p)
		}
	}
}
