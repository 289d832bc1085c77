// Package collector is the one goroutine that owns a run's state: it drives the scrape pool,
// feeds every result to the step tracker in the order it stamps them, closes steps (on a
// timer, on request, and at shutdown, each after a boundary scrape of every target), records
// what it saw, and hands closed steps to the sinks.
package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/target"
)

// Options configure a Collector.
type Options struct {
	// Options are how the targets are scraped, given to the scrape pool as they are but for
	// KeepBody, which is set when Recorder is. Clock also runs the collector's ticks and step
	// timer, and Logger is the collector's too.
	scrape.Options
	// Targets are scraped from the start; their URLs must be distinct and without user info
	// (target.Parse moves it to the credentials).
	Targets []target.Target
	// APIAuth gives the credentials of a target that SetTargets or AddTargets adds without
	// credentials of its own and that is not a target already (one keeps its own); nil gives
	// none. Those are the API's targets: whoever may call it can name any server, so it is the
	// caller's to decide what such a target may be sent. Called on the collector's goroutine.
	APIAuth func(url string) target.Auth
	// DefaultAuth is given to targets that discovery finds (SetSourceTargets) without
	// credentials of their own.
	DefaultAuth target.Auth
	Interval    time.Duration
	StepEvery   time.Duration // 0: steps end only on request and at shutdown
	Tracker     step.Options
	Recorder    *record.Writer // nil: no recording
	// Sinks get every closed step, in order, on the collector goroutine; their Write must not
	// block (a sink.Runtime queues them). The collector never closes them: their owner does,
	// after Run returns.
	Sinks    []sink.Sink
	OnStep   func(*step.Record) // called after the sinks, e.g. to print a summary
	Keep     int                // closed steps kept in memory for Steps; default 1000
	Observer Observer           // nil: none
	// NoFinalStep leaves the open step unclosed at shutdown, with no last boundary scrape (a
	// caller that ends every step itself, like the demo, does not want a last partial one).
	NoFinalStep bool
	// OnOpenStep gets the step open at shutdown when it is not closed: when StepEvery is 0,
	// after a last boundary scrape of every target (steps then end only on request, so the open
	// one is no step and goes to no sink, but its caller may keep it: open-step.json); with
	// NoFinalStep, as it was at the last event (a live view's whole session, which no step
	// ever ends, up to its last scrape).
	OnOpenStep func(*step.Record)
	// Boundary is called, on the collector's goroutine, as a boundary's scrapes start (a step
	// end, a phase edge, a publish), and the function it returns once that boundary and those
	// queued behind it are closed; nil: nothing. The trainer waits for those scrapes: the run
	// holds the garbage collector back meanwhile (see package run).
	Boundary func() (end func())
	// Resume continues the step numbers of an earlier run after ResumeAfter: a step end
	// must name a greater number, and timer steps count on from it.
	Resume      bool
	ResumeAfter int64
	// FirstScrapeWait bounds how long AddTargets waits for the first scrape of the targets it
	// adds; default 2 s.
	FirstScrapeWait time.Duration
}

// Observer is told what the collector does, for self-metrics. Its methods run on the collector
// goroutine and must not block.
type Observer interface {
	Scraped(res *scrape.Result) // every scrape result, as it is processed
	Skipped(target string)      // a tick found the target's previous scrape still running
	StepClosed(rec *step.Record)
	TargetsChanged(added, removed []string)
}

type noObserver struct{}

func (noObserver) Scraped(*scrape.Result)       {}
func (noObserver) Skipped(string)               {}
func (noObserver) StepClosed(*step.Record)      {}
func (noObserver) TargetsChanged(_, _ []string) {}

// ErrStepOrder is returned for a step number not greater than the last one.
var ErrStepOrder = errors.New("step number must be greater than the last step")

// MaxStep is the largest step number: 2^53, the largest integer up to which every integer
// survives a JSON reader that keeps numbers as float64.
const MaxStep int64 = 1 << 53

// ErrStepRange is returned for a step number outside 0..MaxStep. Training loops count steps
// from 0 as often as from 1, so both are allowed.
var ErrStepRange = fmt.Errorf("step number must be from 0 to %d (2^53)", MaxStep)

// ErrStopped is returned by requests made after the collector stopped.
var ErrStopped = errors.New("collector stopped")

// Collector runs the scrape-and-step loop. Create it with New, run it with Run; its other
// methods may be called from any goroutine while Run runs.
type Collector struct {
	opt  Options
	log  *slog.Logger
	reqs chan func(*state)
	done chan struct{}
}

// New returns a collector; nothing starts before Run.
func New(opt Options) *Collector {
	if opt.Clock == nil {
		opt.Clock = clock.Real{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Observer == nil {
		opt.Observer = noObserver{}
	}
	if opt.Keep <= 0 {
		opt.Keep = 1000
	}
	if opt.FirstScrapeWait <= 0 {
		opt.FirstScrapeWait = 2 * time.Second
	}
	return &Collector{opt: opt, log: opt.Logger, reqs: make(chan func(*state)), done: make(chan struct{})}
}

// call runs f on the collector's goroutine and waits for it.
func (c *Collector) call(ctx context.Context, f func(*state)) error {
	ran := make(chan struct{})
	select {
	case c.reqs <- func(s *state) { f(s); close(ran) }:
	case <-c.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ran:
		return nil
	case <-c.done:
		return ErrStopped
	}
}

// EndStep closes the open step as step n (n < 0: the next number) after a boundary scrape of
// every target, and returns its record once the sinks have it. n must be at most MaxStep and
// greater than every step number ended or being ended (ErrStepRange, ErrStepOrder).
//
// A W3C trace context put in ctx by WithTraceParent goes into the record (its TraceParent).
func (c *Collector) EndStep(ctx context.Context, n int64) (step.Record, error) {
	reply := make(chan endResult, 1)
	tp := TraceParent(ctx)
	if err := c.call(ctx, func(s *state) { s.requestEnd(n, tp, reply) }); err != nil {
		return step.Record{}, err
	}
	select {
	case r := <-reply:
		return r.rec, r.err
	case <-ctx.Done():
		return step.Record{}, ctx.Err()
	case <-c.done:
		select {
		case r := <-reply:
			return r.rec, r.err
		default:
			return step.Record{}, ErrStopped
		}
	}
}

type traceParentKey struct{}

// WithTraceParent returns ctx carrying a W3C traceparent (the trainer's step span), which
// EndStep gives the record; "" carries none.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceParentKey{}, traceparent)
}

// TraceParent is the traceparent WithTraceParent put in ctx, "" for none.
func TraceParent(ctx context.Context) string {
	tp, _ := ctx.Value(traceParentKey{}).(string)
	return tp
}

// wait waits for the answer to a query sent with call.
func (c *Collector) wait(ctx context.Context, reply chan endResult) endResult {
	select {
	case r := <-reply:
		return r
	case <-ctx.Done():
		return endResult{err: ctx.Err()}
	case <-c.done:
		select {
		case r := <-reply:
			return r
		default:
			return endResult{err: ErrStopped}
		}
	}
}

// Live returns the open step so far (no boundary scrape) and every target's state.
func (c *Collector) Live(ctx context.Context) (step.Record, []TargetState, error) {
	var rec step.Record
	var ts []TargetState
	err := c.call(ctx, func(s *state) {
		rec = s.tracker.Peek(s.stamp())
		ts = s.targetStates()
	})
	return rec, ts, err
}

// Steps returns the closed steps kept in memory with a number >= since.
func (c *Collector) Steps(ctx context.Context, since int64) ([]step.Record, error) {
	var out []step.Record
	err := c.call(ctx, func(s *state) {
		for _, r := range s.closed {
			if r.Step >= since {
				out = append(out, r)
			}
		}
	})
	return out, err
}

// Targets returns the current targets' URLs.
func (c *Collector) Targets(ctx context.Context) ([]string, error) {
	var out []string
	err := c.call(ctx, func(s *state) { out = s.pool.Targets() })
	return out, err
}

// Run scrapes and closes steps until ctx is done, then closes the open step after a final
// boundary scrape, closes the recording, and returns. The sinks have then had their last
// Write; closing them is up to their owner.
func (c *Collector) Run(ctx context.Context) error {
	defer close(c.done)
	s := newState(c)
	// Closing a large fleet's step keeps this goroutine away from results for up to a second
	// or two; meanwhile the targets' results wait here, not in their goroutines, which would
	// then still be busy at the next tick and skip it. At 1,000 targets at 2 Hz, a buffer of
	// 256 skipped 100 to 200 ticks at each step close; 4,096 holds two seconds of them.
	results := make(chan scrape.Result, 4096)
	sopt := c.opt.Options
	sopt.KeepBody = c.opt.Recorder != nil
	s.pool = scrape.NewPool(sopt, results)
	// The run starts before its first scrape: the first step starts here, and an engine that
	// counted between now and its first scrape is counted (its _created is after this).
	start := s.stamp()
	s.tracker.Begin(start)
	if rw := c.opt.Recorder; rw != nil {
		s.recordFailed(rw.Start(start))
	}
	s.setSource(StaticSource, c.opt.Targets)
	for s.pending != nil { // the run's first targets, all of them before anything else
		s.applyMore()
	}
	s.late = true
	ticker := c.opt.Clock.NewTicker(c.opt.Interval)
	defer ticker.Stop()
	var stepC <-chan time.Time
	if c.opt.StepEvery > 0 {
		st := c.opt.Clock.NewTicker(c.opt.StepEvery)
		defer st.Stop()
		stepC = st.C()
	}
	s.tick() // the first scrape happens at start
	for {
		select {
		case <-ctx.Done():
			return s.shutdown(results)
		case <-ticker.C():
			s.onTick()
		case <-stepC:
			if !s.stepPending() { // a slow step end does not pile up timer steps behind it
				s.requestEnd(-1, "", nil)
			}
		case f := <-c.reqs:
			f(s)
		case res := <-results:
			s.observe(res)
		case <-s.cutC():
			s.cutUnanswered()
		case <-s.moreC():
			s.applyMore() // the next batch of a large change of targets
		}
	}
}

// shutdown closes the open step with a final boundary scrape (with StepEvery 0, only takes the
// scrape and hands the open step to OnOpenStep; with NoFinalStep, neither: OnOpenStep gets it as
// it is, after a step end in progress), bounded in time so that a dead target cannot hold the
// exit, then closes the scrape pool and the recording.
func (s *state) shutdown(results chan scrape.Result) error {
	s.settle()
	switch {
	case s.c.opt.NoFinalStep:
	case s.c.opt.StepEvery == 0:
		s.enqueue(endQuery{kind: queryExit}) // behind a step end in progress, if any
	default:
		s.requestEnd(-1, "", nil)
	}
	deadline := s.c.opt.Clock.NewTimer(2*s.c.opt.Timeout + 2*time.Second)
	for s.boundary != nil {
		select {
		case res := <-results:
			s.observe(res)
		case <-s.cutC():
			s.cutUnanswered()
		case <-deadline.C():
			s.c.log.Warn("closing the last step without every boundary scrape", "missing", len(s.boundary.pending))
			for s.boundary != nil { // this one, and any step end queued behind it
				s.closeStep()
			}
		}
	}
	deadline.Stop()
	if s.c.opt.NoFinalStep && s.c.opt.OnOpenStep != nil {
		// It ends at the last event stamped (a live view's last scrape), not now: no scrape
		// measured the time since, which would only water its rates down.
		rec := s.tracker.Peek(s.last)
		s.c.opt.OnOpenStep(&rec)
	}
	s.pool.Close()
	if s.c.opt.Recorder != nil {
		if err := s.c.opt.Recorder.Close(); err != nil {
			return fmt.Errorf("close recording: %w", err)
		}
	}
	return nil
}
