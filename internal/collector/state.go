package collector

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
)

// state is everything the collector goroutine owns.
type state struct {
	// servers are what the servers behind router targets reported (see servers.go), and
	// toldUnversioned the engines logged as holding no known version.
	servers         map[string]serverState
	toldUnversioned map[step.WorkerID]bool
	c               *Collector
	pool            *scrape.Pool
	tracker         *step.Tracker
	last            time.Time // last stamp: stamps strictly increase
	targets         map[string]*TargetState
	sources         sources // the targets of each source; targets is their union

	labels map[string]map[string]string // each target's labels, for those that have some

	lastStep int64  // highest step number closed or requested
	phase    string // the phase open once every queued edge has taken effect
	nextID   uint64
	boundary *boundary // the step end or phase edge in progress
	// phaseTrace is the last traceparent a phase edge of the open step was given: the step's,
	// when its end is given none.
	phaseTrace string
	// boundaryEnd ends what Options.Boundary began, once no boundary is in progress or queued.
	boundaryEnd func()
	// absorbed is set when a tick came while the boundary in progress scrapes every target
	// (see onTick).
	absorbed  bool
	queue     []endQuery // step ends and phase edges waiting for it
	closed    []step.Record
	recordErr bool
	late      bool // the run's first targets are set: later ones were added while it ran

	// firstWait holds, per target, those waiting for its first scrape (AddTargets).
	firstWait map[string][]chan struct{}

	res scrape.Result // the result observe is processing

	pending     *change              // the change of targets being applied, nil when none
	removedAt   map[string]time.Time // removed targets not forgotten yet, by removal time
	forgetQueue []forgetLater        // the same, in the order they were removed
	forgetMore  bool                 // forgetExpired left expired ones for the next batch

	policy policyState // the trainer's policy versions and the engines' (see policy.go)
}

// A query's kind: what happens once its boundary scrapes are in.
const (
	queryStep       = iota // close the open step
	queryPhaseStart        // open a phase
	queryPhaseEnd          // end the open phase
	queryExit              // hand the open step to OnOpenStep, unclosed
	queryPolicy            // publish a policy version
)

type endQuery struct {
	kind  int
	n     int64          // queryStep: the step's number; queryPolicy: the version
	phase string         // queryPhase*: the phase's name
	name  string         // queryPolicy: the version's name, "" for none
	trace string         // queryStep, queryPhase*: the W3C traceparent given with the call, if any
	reply chan endResult // nil for timer and shutdown steps
}

type endResult struct {
	rec    step.Record
	edge   PhaseEdge
	policy PolicyVersion
	err    error
}

// boundary is a step end or phase edge waiting for every target's boundary scrape.
type boundary struct {
	id      uint64
	q       endQuery
	pending map[string]bool
	// cut fires a scrape timeout after the boundary started when targets that never answered
	// are among those pending (see cutUnanswered); nil when none are.
	cut clock.Timer
}

// TargetState is what the collector knows of one target.
type TargetState struct {
	URL          string    `json:"url"`
	Up           bool      `json:"up"`
	LastScrape   time.Time `json:"last_scrape,omitzero"`
	LastDuration float64   `json:"last_duration_s"`
	LastError    string    `json:"last_error,omitempty"`
	Scrapes      int64     `json:"scrapes"`
	Failures     int64     `json:"failures"`
	Skipped      int64     `json:"skipped_ticks"`
	BodyBytes    int       `json:"body_bytes"`
	// Note says what cannot be exact about the target's figures, "" when nothing.
	Note string `json:"note,omitempty"`
	// NewConnections is set once the target answered out of turn on a kept-alive connection:
	// every scrape of it goes on a new connection from then on (see scrape.Result).
	NewConnections bool `json:"new_connections,omitempty"`

	seen bool
	// answered is set once a scrape of the target succeeded: its workers have a baseline.
	answered bool
	reason   string // of the last failure, "" when up
	late     bool   // added while the run ran, not at its start
	hint     string // the setup hint last logged (see page.Hint)
	// ratioOver is set once a warning named the target for counters that contradict each
	// other (step.RatioOver): it is named once.
	ratioOver bool
	// negative holds the histogram families a warning named for the target for a bucket below
	// 0 (step.NegativeBounds): each is named once.
	negative map[string]bool

	// Labels are the labels discovery gave the target (file_sd); read only.
	Labels map[string]string `json:"labels,omitempty"`
}

func newState(c *Collector) *state {
	s := &state{c: c, tracker: step.NewTracker(c.opt.Tracker), targets: map[string]*TargetState{}, lastStep: -1, firstWait: map[string][]chan struct{}{},
		removedAt: map[string]time.Time{}}
	if c.opt.Resume {
		s.lastStep = c.opt.ResumeAfter
	}
	return s
}

// stamp returns the time of the event being processed: the clock's reading, made strictly
// greater than the previous stamp so that events have one order, in UTC and without a
// monotonic reading so that a recording reproduces it exactly.
func (s *state) stamp() time.Time {
	now := s.c.opt.Clock.Now().UTC().Round(0)
	if !now.After(s.last) {
		now = s.last.Add(time.Nanosecond)
	}
	s.last = now
	return now
}

// onTick starts the interval's scrapes, unless a step end or phase edge is taking its boundary
// scrapes: those scrape every target now, and stand for the tick's. A tick in their midst found
// most targets busy with them (a skipped tick each, hundreds at every step end of a 1,000-target
// fleet) and scraped the others again ahead of the boundary scrapes still to come; held until
// the boundary's end, it scraped every target again just as the trainer's next call came. A
// boundary stands for one tick at most: one that outlasts an interval (a target that does not
// answer) does not hold the fleet's scrapes.
func (s *state) onTick() {
	if s.boundary != nil && !s.absorbed {
		s.absorbed = true
		return
	}
	s.tick()
}

func (s *state) tick() {
	s.forgetExpired()
	for _, u := range s.pool.Tick() {
		if ts := s.targets[u]; ts != nil {
			ts.Skipped++
		}
		s.c.opt.Observer.Skipped(u)
	}
}

// firstScraped releases those waiting for target's first scrape.
func (s *state) firstScraped(target string) {
	for _, ch := range s.firstWait[target] {
		close(ch)
	}
	delete(s.firstWait, target)
}

// fewTargets is what a log line shows of a list of targets: a fleet's thousand URLs would make
// one line of tens of kilobytes. The first ones, and how many more (the API lists them all).
func fewTargets(urls []string) []string {
	const shown = 8
	if len(urls) <= shown {
		return urls
	}
	return append(urls[:shown:shown], fmt.Sprintf("... and %d more", len(urls)-shown))
}

func (s *state) targetStates() []TargetState {
	var out []TargetState
	for _, u := range s.pool.Targets() {
		out = append(out, *s.targets[u])
	}
	return out
}

func (s *state) observe(in scrape.Result) {
	// The result is handed on by pointer (to the observer, among others), from a slot of the
	// state's rather than from in, which would then move to the heap: two thousand results a
	// second were a tenth of the garbage of a 1,000-target run.
	s.res = in
	res := &s.res
	defer s.observed(in.Page)
	if gen, ok := s.pool.Generation(res.Target); !ok || gen != res.Gen {
		// A scrape of a removed target instance, delivered late: its target is gone, or is a
		// new instance whose worker must not see the old one's page.
		return
	}
	ts := s.stamp()
	if res.Page != nil && res.Err() == nil {
		// The workers a target has had within the step are bounded, as those of one page are:
		// a page over the bound is a failed scrape, recorded as one, and never observed.
		if err := s.c.opt.Limits.CheckStepWorkers(res.Page, s.tracker.StepWorkers(res.Target, res.Page), s.tracker.StepTokenizers(res.Target, res.Page)); err != nil {
			res.Page, res.ParseErr = nil, err
		}
	}
	if rw := s.c.opt.Recorder; rw != nil {
		body, ferr := res.Body, res.FetchErr
		if res.ParseErr != nil {
			// Replay gets the failure, so that it counts what the run did (it knows no limits).
			// The page is not recorded: one over the limits would grow the recording, and one
			// that is not Prometheus text may hold anything, its server's secrets too.
			body, ferr = nil, res.ParseErr
		}
		if err := rw.Scrape(ts, res.Target, body, ferr); err != nil && !s.recordErr {
			s.recordErr = true
			s.c.log.Error("recording failed; the run goes on without it", "err", err)
		}
	}
	err := res.Err()
	undated := s.tracker.Observe(ts, res.Target, res.Page, err)
	if res.Version != nil && err == nil {
		s.engineVersion(ts, res.Target, res.Version) // read right after the page
	}
	if res.Servers != nil && err == nil {
		s.serverVersions(ts, res.Target, res.Servers)
	}
	s.c.opt.Observer.Scraped(res)
	if t := s.targets[res.Target]; t != nil {
		s.updateTarget(t, ts, res)
		s.hint(t, res)
		if undated && t.late {
			// Counts made before a target's first scrape are a baseline unless _created dates
			// them after the run's start. For a target there from the start they predate the
			// run; for one added later they may not, and nothing on the page can tell.
			t.Note = undatedNote
			s.c.log.Warn("target "+undatedNote+"; its counts until now are a baseline, not part of any step", "target", t.URL)
		}
	}
	s.firstScraped(res.Target)
	if b := s.boundary; b != nil && res.Boundary == b.id {
		delete(b.pending, res.Target)
		s.maybeClose()
	}
}

// observed ends observe: the page goes back to its target's parser (the tracker and the
// observers copy what they keep; a page over the limits was taken out of the result, and goes
// back too), and the slot holds no page.
func (s *state) observed(pg *page.Page) {
	pg.Release()
	s.res = scrape.Result{}
}

// updateTarget keeps the target's state and logs its transitions between up and down once.
func (s *state) updateTarget(t *TargetState, ts time.Time, res *scrape.Result) {
	err := res.Err()
	t.Scrapes++
	t.LastScrape = ts
	t.LastDuration = res.Duration.Seconds()
	t.BodyBytes = res.BodyBytes
	t.NewConnections = res.NewConnections
	up := err == nil
	if !up {
		t.Failures++
		t.LastError = err.Error()
	} else {
		t.LastError = ""
	}
	switch {
	case up && (!t.Up && t.seen):
		s.c.log.Info("target up", "target", t.URL)
	case !up && res.Reason() == "limit" && (t.Up || !t.seen || t.reason != "limit"):
		// Also when a target already down for another reason goes over its limits: the fix
		// is on its side, and the log must say so.
		s.c.log.Warn("target down: its page is over the per-target limits (max_series_per_target, max_workers_per_target); its scrapes fail until it shrinks",
			"target", t.URL, "reason", "limit", "err", err)
	case !up && res.Reason() == "parse" && (t.Up || !t.seen || t.reason != "parse"):
		// Once when it starts answering so, as for limits: every such scrape is counted
		// (vllmstat_target_scrape_failures_total{reason="parse"}), not logged.
		s.c.log.Warn("target down: its page is not Prometheus text; counted as a failed scrape until it is",
			"target", t.URL, "reason", "parse", "err", err)
	case !up && (t.Up || !t.seen):
		s.c.log.Warn("target down", "target", t.URL, "reason", res.Reason(), "err", err)
	}
	t.Up, t.seen, t.reason = up, true, res.Reason()
	t.answered = t.answered || up
}

// undatedNote is what a target added during the run is told when its first page had counts
// without _created.
const undatedNote = "first seen with counts already made; a page without _created cannot tell when they were made"

// requestEnd asks for the open step to end as step n (n < 0: the next number, from 1). lastStep
// never exceeds MaxStep, so the next number cannot overflow.
func (s *state) requestEnd(n int64, traceparent string, reply chan endResult) {
	fail := func(err error) {
		if reply != nil {
			reply <- endResult{err: err}
		} else {
			s.c.log.Error("step not closed", "err", err)
		}
	}
	switch {
	case n < 0 && s.lastStep >= MaxStep:
		fail(fmt.Errorf("%w: the last step is %d, so there is no next one; the open step stays open", ErrStepRange, s.lastStep))
		return
	case n < 0:
		n = max(s.lastStep+1, 1)
	case n > MaxStep:
		fail(fmt.Errorf("step %d: %w", n, ErrStepRange))
		return
	case n <= s.lastStep && s.c.opt.Resume && s.lastStep == s.c.opt.ResumeAfter:
		fail(fmt.Errorf("step %d: %w (this run continues the out_dir's steps; what steps.jsonl and the sinks' files hold ends at step %d)", n, ErrStepOrder, s.lastStep))
		return
	case n <= s.lastStep:
		fail(fmt.Errorf("step %d: %w (the last step ended or being ended is %d)", n, ErrStepOrder, s.lastStep))
		return
	}
	s.lastStep = n
	s.enqueue(endQuery{n: n, trace: traceparent, reply: reply})
}

// enqueue starts q's boundary scrapes, or queues q behind the step end or phase edge in
// progress.
func (s *state) enqueue(q endQuery) {
	if s.boundary != nil {
		s.queue = append(s.queue, q)
		return
	}
	s.startBoundary(q)
}

// stepPending reports whether a step end is in progress or queued.
func (s *state) stepPending() bool {
	if s.boundary != nil && s.boundary.q.kind == queryStep {
		return true
	}
	return slices.ContainsFunc(s.queue, func(q endQuery) bool { return q.kind == queryStep })
}

func (s *state) startBoundary(q endQuery) {
	if s.boundaryEnd == nil && s.c.opt.Boundary != nil {
		s.boundaryEnd = s.c.opt.Boundary()
	}
	s.nextID++
	b := &boundary{id: s.nextID, q: q, pending: map[string]bool{}}
	unanswered := false
	for _, u := range s.pool.Boundary(b.id) {
		b.pending[u] = true
		if t := s.targets[u]; t == nil || !t.answered {
			unanswered = true
		}
	}
	if unanswered && s.c.opt.Timeout > 0 {
		b.cut = s.c.opt.Clock.NewTimer(s.c.opt.Timeout)
	}
	s.boundary = b
	s.maybeClose()
}

// cutC is ready when the boundary in progress stops waiting for the targets that never
// answered; nil when there is none to stop waiting for.
func (s *state) cutC() <-chan time.Time {
	if s.boundary == nil || s.boundary.cut == nil {
		return nil
	}
	return s.boundary.cut.C()
}

// cutUnanswered stops waiting for the boundary scrapes of the targets that have not answered
// once, a scrape timeout after the boundary started. Such a target has no baseline, so that its
// boundary scrape, a baseline itself, closes nothing of the step (counts that _created dates
// after the run's start are counted in the step its page comes in). Yet its boundary request
// waits behind its first scrape, which has the first pages' budget (10 s): one added while the
// run ran that never answered held a step end of a 0.5 s interval for 18 s, the 2 s of its
// registration's wait, its first scrape's 10 s, and its boundary scrape.
func (s *state) cutUnanswered() {
	b := s.boundary
	b.cut = nil
	for u := range b.pending {
		if t := s.targets[u]; t == nil || !t.answered {
			delete(b.pending, u)
		}
	}
	s.maybeClose()
}

func (s *state) maybeClose() {
	if s.boundary != nil && len(s.boundary.pending) == 0 {
		s.closeStep()
	}
}

// closeStep does what the boundary in progress was for, once its boundary scrapes are in (or
// the shutdown's deadline passed), and starts the next one queued.
func (s *state) closeStep() {
	q := s.boundary.q
	if s.boundary.cut != nil {
		s.boundary.cut.Stop()
	}
	s.boundary, s.absorbed = nil, false
	ts := s.stamp()
	switch q.kind {
	case queryStep:
		s.endStep(q, ts)
	case queryPhaseStart, queryPhaseEnd:
		s.phaseEdge(q, ts)
	case queryPolicy:
		s.publish(q, ts)
	case queryExit:
		if s.c.opt.OnOpenStep != nil {
			rec := s.tracker.Peek(ts)
			s.c.opt.OnOpenStep(&rec)
		}
	}
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		s.startBoundary(next)
	}
	if s.boundary == nil && s.boundaryEnd != nil {
		s.boundaryEnd()
		s.boundaryEnd = nil
	}
}

// endStep closes the open step as step q.n at ts.
func (s *state) endStep(q endQuery, ts time.Time) {
	rec := s.tracker.EndStep(q.n, ts)
	rec.TraceParent = cmp.Or(q.trace, s.phaseTrace)
	s.phaseTrace = ""
	s.unversioned()
	s.ratiosOver(&rec)
	s.negativeBounds(&rec)
	if rw := s.c.opt.Recorder; rw != nil {
		err := rw.StepEnd(ts, q.n)
		if err == nil {
			err = rw.Flush()
		}
		s.recordFailed(err)
	}
	// A sink's Write is never cancelled: one that may block has its own queue (see package sink).
	for _, sk := range s.c.opt.Sinks {
		if err := sk.Write(context.Background(), &rec); err != nil {
			s.c.log.Error("sink failed", "step", rec.Step, "err", err)
		}
	}
	s.c.opt.Observer.StepClosed(&rec)
	if s.c.opt.OnStep != nil {
		s.c.opt.OnStep(&rec)
	}
	s.closed = append(s.closed, keepable(&rec))
	if len(s.closed) > s.c.opt.Keep {
		s.closed = s.closed[len(s.closed)-s.c.opt.Keep:]
	}
	if q.reply != nil {
		q.reply <- endResult{rec: rec}
	}
}

// ratiosOver warns of the targets whose counters contradicted each other over the step (a
// ratio of two counts above 1, left out of the record), once per target.
func (s *state) ratiosOver(rec *step.Record) {
	for _, ro := range rec.RatiosOver {
		t := s.targets[ro.Target]
		if t == nil || t.ratioOver {
			continue
		}
		t.ratioOver = true
		s.c.log.Warn("target's counters contradict each other: a ratio's numerator rose more than its denominator over the step (counted twice, or one increase landed a scrape late); the ratio is left out of the records while they do",
			"target", t.URL, "step", rec.Step, "ratio", ro.Ratio, "numerator", ro.Num, "numerator_increase", ro.NumV,
			"denominator", ro.Den, "denominator_increase", ro.DenV)
	}
}

// negativeBounds warns of the targets whose pages gave a histogram a bucket below 0 in the
// step (refused, left out of the records), once per target and family.
func (s *state) negativeBounds(rec *step.Record) {
	for _, nb := range rec.NegativeBounds {
		t := s.targets[nb.Target]
		if t == nil || t.negative[nb.Family] {
			continue
		}
		if t.negative == nil {
			t.negative = map[string]bool{}
		}
		t.negative[nb.Family] = true
		s.c.log.Warn("target's histogram has a bucket below 0, which its family (a latency, length or size) cannot have; the histogram is left out of the records while it does",
			"target", t.URL, "step", rec.Step, "engine", nb.Engine, "histogram", nb.Family)
	}
}

// recordFailed logs the recording's first failure; the run goes on without it.
func (s *state) recordFailed(err error) {
	if err != nil && !s.recordErr {
		s.recordErr = true
		s.c.log.Error("recording failed; the run goes on without it", "err", err)
	}
}

// keepable returns rec as Steps keeps it: Steps serves records as JSON, which carries neither
// their timeline (every sample of the step), their Values (what Metrics spells as keys), the
// workers forgotten nor the targets over a ratio, so the kept copy goes without them rather than holding them for the last
// Keep steps. rec itself stays whole: the sinks may still be reading it.
func keepable(rec *step.Record) step.Record {
	kept := *rec
	kept.Timeline, kept.Values, kept.Forgotten, kept.RatiosOver, kept.NegativeBounds = nil, nil, nil, nil, nil
	if rec.PerWorker != nil {
		kept.PerWorker = slices.Clone(rec.PerWorker)
		for i := range kept.PerWorker {
			kept.PerWorker[i].Values = nil
		}
	}
	if rec.Phases != nil {
		kept.Phases = make(map[string]*step.Phase, len(rec.Phases))
		for name, ph := range rec.Phases {
			p := *ph
			p.Values = nil
			kept.Phases[name] = &p
		}
	}
	return kept
}
