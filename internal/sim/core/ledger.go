package core

import (
	"sort"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
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
type Schedule struct {
	Ends      []time.Duration
	Publishes []Publish
}

// spanStep is the step holding the instant t of a span: from a step's start, before its end.
func (sc *Schedule) spanStep(t time.Duration) int {
	return sort.Search(len(sc.Ends), func(i int) bool { return sc.Ends[i] > t })
}

// tokenStep is the step whose counts include tokens generated at t: after the step's start, up
// to its end, as a scrape at the end of the step has them.
func (sc *Schedule) tokenStep(t time.Duration) int {
	return sort.Search(len(sc.Ends), func(i int) bool { return sc.Ends[i] >= t })
}

// latest returns the latest version published at or before t.
func (sc *Schedule) latest(t time.Duration) (int, bool) {
	i := sort.Search(len(sc.Publishes), func(i int) bool { return sc.Publishes[i].At > t })
	if i == 0 {
		return 0, false
	}
	return sc.Publishes[i-1].Version, true
}

// ledger is one engine's accounting; it outlives the engine's restarts.
type ledger struct {
	Sched    *Schedule
	State    State
	Since    time.Duration // start of the open span in state
	Steps    []StepTruth
	Versions []VersionChange
}

func (l *ledger) step(i int) *StepTruth {
	for len(l.Steps) <= i {
		l.Steps = append(l.Steps, StepTruth{})
	}
	return &l.Steps[i]
}

// account counts the open span up to at, split at the step ends.
func (l *ledger) Account(at time.Duration) {
	for l.Since < at {
		i := l.Sched.spanStep(l.Since)
		end := at
		if i < len(l.Sched.Ends) {
			end = min(at, l.Sched.Ends[i])
		}
		l.step(i).Time[l.State] += end - l.Since
		l.Since = end
	}
}

// total is the engine's time in each state from the start through t, at or after the open
// span's start.
func (l *ledger) total(t time.Duration) [NumStates]time.Duration {
	var ts [NumStates]time.Duration
	for _, st := range l.Steps {
		for k, d := range st.Time {
			ts[k] += d
		}
	}
	if t > l.Since {
		ts[l.State] += t - l.Since
	}
	return ts
}

// tokens counts n tokens generated at t, stale ones apart.
func (l *ledger) tokens(t time.Duration, n int, version int) {
	if n == 0 {
		return
	}
	s := l.step(l.Sched.tokenStep(t))
	s.GenerationTokens += int64(n)
	if v, ok := l.Sched.latest(t); ok && version < v {
		s.StaleTokens += int64(n)
	}
}

// ledgerState is the engine's state now, by the rules at the top of this file.
func (e *Engine) LedgerState() State {
	s := &e.Stats
	switch {
	case s.Rl.Active && e.showsLoads():
		return StateLoadingWeights
	case e.cfg.SGLang:
		if s.Sg.Logged.Paused > 0 {
			return StatePaused
		}
	case !e.ShowsSleep:
	case s.Res.Weights != snap.WeightsResident:
		return StateAsleep
	case s.Res.Sleeping:
		return StateWaking
	case s.Res.Paused:
		return StatePaused
	}
	if s.Running > 0 {
		return StateGenerating
	}
	return StateIdle
}

// showsLoads reports whether the engine's page shows its weight loads.
func (e *Engine) showsLoads() bool { return e.cfg.SGLang || e.ShowsSleep }

// note closes the engine's open span at at if its state changed. Changes are noted in time
// order; a change noted before the end of the open span (an event applied to an engine whose
// iteration ran past it) takes effect at that end.
func (e *Engine) Note(at time.Duration) {
	st := e.LedgerState()
	if st == e.Led.State {
		return
	}
	e.Led.Account(at)
	e.Led.State = st
}

// traceEvent is one raw event of an engine: tokens generated by an iteration ending at at (n
// of them), a weight load ending at at with version n, or a restart.
type TraceEvent struct {
	At   time.Duration
	Kind traceKind
	N    int
}

type traceKind uint8

const (
	TraceTokens traceKind = iota + 1
	TraceLoaded
	TraceRestart
)
