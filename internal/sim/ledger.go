package sim

import (
	"slices"
	"sort"
	"strconv"
	"time"
)

// The simulator's ground truth, for tests that check vllmstat's time ledger and policy keys
// against it: every engine's time in each ledger state, its generated and stale tokens, its
// weight versions, per step and overall, and the trainer's publishes.
//
// An engine's state at each moment is the ledger's definition (unreachable aside, which is the
// scraper's) applied to the engine's exact figures rather than to sampled pages, in its order of
// precedence: loading_weights > asleep > waking > paused > generating > idle. A state counts
// only where the engine's page can show it, so that a reader of the pages can measure it:
//   - loading_weights: a weight load in progress (vLLM's rl_weight_update_active, on pages of
//     the RL layout; SGLang's weight_load_duration_seconds, which gives the load's span at its
//     end);
//   - asleep: weights offloaded or discarded (vLLM's sleep families; an SGLang page has none);
//   - waking: after a sleep, weights resident again and not yet fully awake;
//   - paused: vLLM's scheduler paused outside a sleep; on SGLang, requests held by the sync;
//   - generating: requests running, as of the end of the engine's last iteration (what vLLM's
//     num_requests_running shows; SGLang's gauge shows it only at its log points);
//   - idle: none of these.
//
// Time is simulated time. A step is the loop's: in the colocated loop a step ends at its
// wake-up (Wake), in the async loop at each publish of a new version, and otherwise at the end
// of each GRPO batch; a Poisson workload without the async loop has one step. A token is stale
// when the engine generates it while its weight version (none counts as older than any) is older
// than the trainer's latest published one.

// State is an engine's state in vllmstat's time ledger.
type State uint8

// The ledger states the simulator tells apart.
const (
	StateGenerating State = iota
	StateIdle
	StateAsleep
	StateWaking
	StatePaused
	StateLoadingWeights
	NumStates
)

var stateNames = [NumStates]string{"generating", "idle", "asleep", "waking", "paused", "loading_weights"}

// String is the state's name in the ledger's keys (vllm/time/<state>_s).
func (s State) String() string {
	if s < NumStates {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// NoVersion is the version of an engine that has loaded none since it (re)started: vLLM's
// /weight_info answers null, SGLang's /model_info "default".
const NoVersion = -1

// Publish is the trainer's publish of a new policy version at simulated time At.
type Publish struct {
	Version int
	At      time.Duration
}

// VersionChange is an engine's weight version changing at simulated time At: at the end of a
// weight load, or to NoVersion when its server restarts.
type VersionChange struct {
	Version int
	At      time.Duration
}

// GroundTruth is what the simulation did, as of simulated time At.
type GroundTruth struct {
	At time.Duration
	// StepEnds are the ends of the steps so far: step i (from 1) covers
	// [StepEnds[i-2], StepEnds[i-1]), the first from 0, and the last step, after the last end,
	// is still open.
	StepEnds []time.Duration
	// Publishes are the trainer's publishes so far, in order.
	Publishes []Publish
	// Engines are every engine, server by server.
	Engines []EngineTruth
}

// EngineTruth is one engine's ground truth. Its figures cover [0, Through): Through is the
// simulation's time, or later when the engine's iteration in flight ended after it.
type EngineTruth struct {
	Server, Engine int
	Through        time.Duration
	// Time is the engine's time in each state; it adds up to Through.
	Time [NumStates]time.Duration
	// State is the engine's state at Through: where its next time goes until it changes.
	State State
	// GenerationTokens and StaleTokens count its generated tokens, and those of them that were
	// stale, over every life of its server.
	GenerationTokens, StaleTokens int64
	// Steps are the same figures per step, one per entry of StepEnds and one for the open step.
	Steps []StepTruth
	// Versions are the engine's version changes, in order.
	Versions []VersionChange
}

// StepTruth is one engine's ground truth in one step.
type StepTruth struct {
	Time                          [NumStates]time.Duration
	GenerationTokens, StaleTokens int64
	// Lengths are the requests that finished in the step (see RequestLengths).
	Lengths RequestLengths
}

// schedule is what every engine of a Sim shares of the trainer's timeline: the step ends and the
// publishes, in time order. Some of them may lie ahead of the simulation (the async loop's next
// publish, the colocated loop's wake-up), so that an engine whose iteration runs past one counts
// the time and tokens after it in the right step, and tells stale tokens right.
type schedule struct {
	ends      []time.Duration
	publishes []Publish
}

// spanStep is the step holding the instant t of a span: from a step's start, before its end.
func (sc *schedule) spanStep(t time.Duration) int {
	return sort.Search(len(sc.ends), func(i int) bool { return sc.ends[i] > t })
}

// tokenStep is the step whose counts include tokens generated at t: after the step's start, up
// to its end, as a scrape at the end of the step has them.
func (sc *schedule) tokenStep(t time.Duration) int {
	return sort.Search(len(sc.ends), func(i int) bool { return sc.ends[i] >= t })
}

// latest returns the latest version published at or before t.
func (sc *schedule) latest(t time.Duration) (int, bool) {
	i := sort.Search(len(sc.publishes), func(i int) bool { return sc.publishes[i].At > t })
	if i == 0 {
		return 0, false
	}
	return sc.publishes[i-1].Version, true
}

// ledger is one engine's accounting; it outlives the engine's restarts.
type ledger struct {
	sched    *schedule
	state    State
	since    time.Duration // start of the open span in state
	steps    []StepTruth
	versions []VersionChange
}

func (l *ledger) step(i int) *StepTruth {
	for len(l.steps) <= i {
		l.steps = append(l.steps, StepTruth{})
	}
	return &l.steps[i]
}

// account counts the open span up to at, split at the step ends.
func (l *ledger) account(at time.Duration) {
	for l.since < at {
		i := l.sched.spanStep(l.since)
		end := at
		if i < len(l.sched.ends) {
			end = min(at, l.sched.ends[i])
		}
		l.step(i).Time[l.state] += end - l.since
		l.since = end
	}
}

// total is the engine's time in each state from the start through t, at or after the open
// span's start.
func (l *ledger) total(t time.Duration) [NumStates]time.Duration {
	var ts [NumStates]time.Duration
	for _, st := range l.steps {
		for k, d := range st.Time {
			ts[k] += d
		}
	}
	if t > l.since {
		ts[l.state] += t - l.since
	}
	return ts
}

// tokens counts n tokens generated at t, stale ones apart.
func (l *ledger) tokens(t time.Duration, n int, version int) {
	if n == 0 {
		return
	}
	s := l.step(l.sched.tokenStep(t))
	s.GenerationTokens += int64(n)
	if v, ok := l.sched.latest(t); ok && version < v {
		s.StaleTokens += int64(n)
	}
}

// ledgerState is the engine's state now, by the rules at the top of this file.
func (e *Engine) ledgerState() State {
	s := &e.stats
	switch {
	case s.rl.active && e.showsLoads():
		return StateLoadingWeights
	case e.cfg.SGLang:
		if s.sg.logged.paused > 0 {
			return StatePaused
		}
	case !e.showsSleep:
	case s.res.weights != weightsResident:
		return StateAsleep
	case s.res.sleeping:
		return StateWaking
	case s.res.paused:
		return StatePaused
	}
	if s.running > 0 {
		return StateGenerating
	}
	return StateIdle
}

// showsLoads reports whether the engine's page shows its weight loads.
func (e *Engine) showsLoads() bool { return e.cfg.SGLang || e.showsSleep }

// note closes the engine's open span at at if its state changed. Changes are noted in time
// order; a change noted before the end of the open span (an event applied to an engine whose
// iteration ran past it) takes effect at that end.
func (e *Engine) note(at time.Duration) {
	st := e.ledgerState()
	if st == e.led.state {
		return
	}
	e.led.account(at)
	e.led.state = st
}

// version returns the engine's weight version, NoVersion without one.
func (s *engineStats) currentVersion() int {
	if !s.hasVersion {
		return NoVersion
	}
	return s.version
}

// GroundTruth returns what the simulation did up to now.
func (s *Sim) GroundTruth() GroundTruth {
	g := GroundTruth{At: s.now, Publishes: slices.Clone(s.sched.publishes[:s.published])}
	for _, end := range s.sched.ends {
		if end > s.now {
			break
		}
		g.StepEnds = append(g.StepEnds, end)
	}
	for _, e := range s.engines {
		l := e.led // a copy: the open span is closed in it only
		l.steps = slices.Clone(l.steps)
		through := max(l.since, s.now)
		l.account(through)
		t := EngineTruth{Server: e.server, Engine: e.index, Through: through, State: l.state, Versions: slices.Clone(l.versions),
			Steps: make([]StepTruth, len(g.StepEnds)+1)}
		for i, st := range l.steps {
			j := min(i, len(g.StepEnds))
			for k := range st.Time {
				t.Steps[j].Time[k] += st.Time[k]
				t.Time[k] += st.Time[k]
			}
			t.Steps[j].GenerationTokens += st.GenerationTokens
			t.Steps[j].StaleTokens += st.StaleTokens
			t.Steps[j].Lengths.Add(&st.Lengths)
			t.GenerationTokens += st.GenerationTokens
			t.StaleTokens += st.StaleTokens
		}
		g.Engines = append(g.Engines, t)
	}
	return g
}

// traceEvent is one raw event of an engine: tokens generated by an iteration ending at at (n
// of them), a weight load ending at at with version n, or a restart.
type traceEvent struct {
	at   time.Duration
	kind traceKind
	n    int
}

type traceKind uint8

const (
	traceTokens traceKind = iota + 1
	traceLoaded
	traceRestart
)
