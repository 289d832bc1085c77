package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/vllmstat/vllmstat/internal/step"
)

// errClosed is returned by Write after Close.
var errClosed = errors.New("sinks are closed")

// Runtime delivers every record to every sink so that a slow or failing sink never blocks step
// close or the other sinks. It owns, for all of them: one bounded queue and goroutine per sink,
// retries with exponential backoff, the failing/recovered and dropping/caught-up transitions
// (each logged once per episode), the drop counts, the prepare stage (plot drawing) in front of
// the sinks that log images, and the drain at exit.
//
// Its owner (the run) adds the sinks, calls Start once, gives the Runtime to the collector as
// its one Sink, and calls Close once the collector has stopped; the collector never closes it.
// The Runtime then closes every sink it was given, once.
type Runtime struct {
	log    *slog.Logger
	inline []Sink  // written on Write's goroutine, before the rest: steps.jsonl
	lanes  []*lane // every queued sink, in the order added
	direct []*lane // the lanes that Write feeds
	images []*lane // the lanes of the sinks that log images: fed by prep if any, else by Write
	prep   *lane   // the prepare stage, or nil
	ivs    []IntervalSink

	ctx    context.Context // cancelled at the exit deadline
	cancel context.CancelFunc

	mu      sync.Mutex // guards closed, started and sending on the direct lanes
	closed  bool
	started bool
	once    sync.Once
	err     error
}

// NewRuntime returns a Runtime with no sinks; log may be nil.
func NewRuntime(log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := &Runtime{log: log}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	return rt
}

// AddInline adds a sink that Write calls directly, before the queued ones, and whose errors
// it returns: steps.jsonl, which keeps the records it cannot write in memory itself and must
// never fall behind the trackers. Call it before Start.
func (rt *Runtime) AddInline(s Sink) {
	rt.inline = append(rt.inline, s)
	rt.addInterval(s)
}

// Add adds a sink behind its own queue and returns its counters. Call it before Start.
func (rt *Runtime) Add(s Sink, opt LaneOptions) *Stats {
	l := newLane(s, opt, rt.log)
	rt.lanes = append(rt.lanes, l)
	if opt.Images {
		rt.images = append(rt.images, l)
	} else {
		rt.direct = append(rt.direct, l)
	}
	rt.addInterval(s)
	return &l.stats
}

func (rt *Runtime) addInterval(s Sink) {
	if is, ok := s.(IntervalSink); ok {
		rt.ivs = append(rt.ivs, is)
	}
}

// SetPrepare puts p in front of the sinks added with Images: it runs once per record, on its
// own goroutine behind a queue of size records (0: 1024), and they get what it returns.
// Without it, they get the records as the others do. Call it before Start.
func (rt *Runtime) SetPrepare(name string, p Preparer, size int) *Stats {
	rt.prep = newLane(nil, LaneOptions{Name: name, Size: size}, rt.log)
	rt.prep.prep = p
	return &rt.prep.stats
}

// Start starts the sinks' goroutines (and each Starter's work). It may be called only once
// the sinks are added; later calls do nothing.
func (rt *Runtime) Start() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.started || rt.closed {
		return
	}
	rt.started = true
	for _, s := range rt.sinks() {
		if st, ok := s.(Starter); ok {
			st.Start()
		}
	}
	if rt.prep != nil {
		rt.prep.next = rt.images
	}
	for _, l := range rt.all() {
		go l.run(rt.ctx)
	}
}

// fed are the lanes that Write feeds.
func (rt *Runtime) fed() []*lane {
	if rt.prep == nil {
		return append(rt.direct[:len(rt.direct):len(rt.direct)], rt.images...)
	}
	return append(rt.direct[:len(rt.direct):len(rt.direct)], rt.prep)
}

// sinks are every sink, in the order added.
func (rt *Runtime) sinks() []Sink {
	out := append([]Sink(nil), rt.inline...)
	for _, l := range rt.lanes {
		out = append(out, l.s)
	}
	return out
}

// all are every lane, the prepare stage included.
func (rt *Runtime) all() []*lane {
	if rt.prep == nil {
		return rt.lanes
	}
	return append([]*lane{rt.prep}, rt.lanes...)
}

// Write hands r to every sink: to the inline ones at once, to the others through their queues,
// without blocking. Its error is the inline sinks'; a queued sink's failure is logged and
// counted by the Runtime, not returned.
func (rt *Runtime) Write(ctx context.Context, r *step.Record) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return fmt.Errorf("write step %d: %w", r.Step, errClosed)
	}
	var errs []error
	for _, s := range rt.inline {
		if err := s.Write(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range rt.fed() {
		l.offer(r)
	}
	return errors.Join(errs...)
}

// Interval hands iv to every IntervalSink; it never blocks.
func (rt *Runtime) Interval(iv step.Interval) {
	for _, s := range rt.ivs {
		s.Interval(iv)
	}
}

// Close stops accepting records and waits until every queued record is delivered, or until ctx
// ends: then the writes in progress are cancelled and the records left are dropped (counted,
// and logged once per sink). Then it closes every sink with ctx, and returns their errors. Only
// the first call does anything; the later ones return its result.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.once.Do(func() {
		rt.mu.Lock()
		rt.closed = true
		started := rt.started
		for _, l := range rt.fed() {
			close(l.ch) // the prepare stage closes the image lanes' when it is done
		}
		rt.mu.Unlock()
		if !started {
			// No goroutine ever ran: whatever was queued is lost.
			for _, l := range rt.all() {
				l.stats.Dropped.Add(int64(len(l.ch)))
				l.stats.Queued.Store(0)
			}
		} else if !rt.wait(ctx) {
			left := 0
			for _, l := range rt.all() {
				left += len(l.ch)
			}
			rt.log.Warn("sinks not drained before the exit deadline; dropping what is left", "left", left)
			rt.cancel()
			rt.wait(context.Background())
		}
		rt.cancel()
		var errs []error
		for _, s := range rt.sinks() {
			if err := s.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		rt.err = errors.Join(errs...)
	})
	return rt.err
}

// wait waits for every lane's goroutine to return, or for ctx to end.
func (rt *Runtime) wait(ctx context.Context) bool {
	for _, l := range rt.all() {
		select {
		case <-l.done:
			continue
		default:
		}
		select {
		case <-l.done:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
