package step

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// A Tracker's work is in files by concern:
//   - observe.go: one scrape (Observe), and the state of workers and targets kept across steps;
//   - acc.go: the open step's and phases' accumulation, worker by worker;
//   - interval.go: each scrape's values for Options.OnInterval;
//   - endstep.go: closing a step (EndStep, Peek) into a Record;
//   - metrics.go, and the files it names: the keys over a pool of workers, by family;
//   - ledger.go, balance.go, compute.go, policy.go: the time ledger's, balance, compute and
//     policy version keys;
//   - phase.go, forget.go, appear.go, targetlabels.go: the events other than scrapes.

// Options shape the records a Tracker produces.
type Options struct {
	// Prefix replaces the leading "vllm" of every key; another engine's keys begin with
	// vllm.EnginePrefix(Prefix, engine).
	Prefix    string
	PerWorker bool // add per_worker records
	Scalars   bool // add the mean/max/p95 aggregates of the per-interval samples
	// NoTimeline leaves Record.Timeline nil, for a run that draws, writes and prints no
	// timelines: the open step then keeps only the samples its statistics need, not their times
	// nor the series only timelines show.
	NoTimeline bool
	// OnInterval, if set, receives every worker's windowed values of every successful scrape
	// (for live views and per-interval exports). It runs on the tracker's goroutine. The
	// Interval's Values are the tracker's until the call returns: a consumer that keeps them
	// keeps a Clone. A fleet has thousands of intervals a second: a map for each was a fifth of
	// the garbage vllmstat made, and one map reused, written and read by key, 4 % of its CPU.
	OnInterval func(Interval)
	// Peak is one GPU's peak, which the compute keys' MFU and MBU are shares of (see
	// computeValues); zero fields leave them out.
	Peak vllm.Peak
}

// Tracker turns a time-ordered stream of scrapes and step ends into step records. The live
// collector and replay feed it the same events, so they produce the same records. A Tracker is
// owned by one goroutine.
type Tracker struct {
	opt     Options
	workers map[WorkerID]*workerState
	targets map[string]*targetState
	started bool
	start   time.Time // start of the open step
	seq     uint64    // the open step's number in this tracker, from 1
	open    *acc
	forgot  map[string]forgotten // each target forgotten, until it answers again
	// departed are the workers forgotten: one back is no new worker (see Observe).
	departed departedWorkers
	now      time.Time // the latest timestamp fed in
	labels   targetLabels
	values   []IntervalValue // the Values of every Interval, emptied after each
	// scratch holds the increases of the worker observed last: every worker's Increase is
	// added to the step (and its phase, and OnInterval's) before the next worker is observed.
	scratch window.Scratch
	keep    keep

	// runStart is when the run began collecting (Begin); a worker first seen in any step counts
	// whole the series created after it.
	runStart    time.Time
	hasRunStart bool

	phase     string               // the open phase, "" when none
	phases    map[string]*phaseAcc // the phases of the open step
	phaseKeep keep                 // what a phase keeps: the open step's series, untimed

	pol policy // the trainer's policy versions (see policy.go)
	// restarts are the open step's engine restarts, as its scrapes showed them, the first
	// maxRestarts of them; restartsUnlisted counts the others.
	restarts         []Restart
	restartsUnlisted int
}

// maxRestarts is how many engine restarts a step lists. A fleet that restarts all at once, or an
// engine whose counters fall at every scrape, would otherwise grow the list by a restart per
// worker and scrape until the step ends (at 10,000 engines scraped every second, 50 MB in a
// minute), and the step's span by as many events.
const maxRestarts = 128

// NewTracker returns a tracker with no step open yet; the first scrape opens it.
func NewTracker(opt Options) *Tracker {
	if opt.Prefix == "" {
		opt.Prefix = vllm.Prefix
	}
	untimed := opt
	untimed.NoTimeline = true
	return &Tracker{opt: opt, workers: map[WorkerID]*workerState{}, targets: map[string]*targetState{}, seq: 1, open: newAcc(), forgot: map[string]forgotten{},
		keep: newKeep(opt), phaseKeep: newKeep(untimed), phases: map[string]*phaseAcc{}}
}
