package sink

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// LaneOptions configure how the Runtime delivers to one sink.
type LaneOptions struct {
	// Name is the sink's name in logs, e.g. "tensorboard".
	Name string
	// Images makes the sink get each record from the prepare stage (with its plots), when the
	// Runtime has one, instead of straight from Write.
	Images bool
	// Size is how many records may wait; beyond it new records are dropped and counted. 0
	// means 1024.
	Size int
	// MaxRetries is how many times a failed record is tried again before it is given up; 0
	// means until the exit deadline.
	MaxRetries int
	// Backoff is the first retry's delay, doubled at each retry up to MaxBackoff. 0 means the
	// sink's own (see Backoffer), else 100ms and 30s.
	Backoff, MaxBackoff time.Duration
}

// lane is one sink's queue and goroutine, or the prepare stage's. Its goroutine owns failing;
// Write's goroutine and it share dropping.
type lane struct {
	opt   LaneOptions
	s     Sink     // nil for the prepare stage
	prep  Preparer // the prepare stage only
	next  []*lane  // the prepare stage only: the image lanes it feeds, and closes when done
	log   *slog.Logger
	ch    chan *step.Record
	stats Stats
	done  chan struct{}

	failing  bool        // the last attempt failed
	dropping atomic.Bool // a drop was logged and the lane has not caught up since

	grace       context.Context // the last tries' time past the exit deadline; nil before
	graceCancel context.CancelFunc
}

// lastTryTime bounds the time a lane spends past the exit deadline: the records still queued
// then get one attempt each, without retries, within it.
const lastTryTime = 2 * time.Second

func newLane(s Sink, opt LaneOptions, log *slog.Logger) *lane {
	if opt.Size <= 0 {
		opt.Size = 1024
	}
	if b, ok := s.(Backoffer); ok && opt.Backoff <= 0 {
		opt.Backoff, opt.MaxBackoff = b.Backoff()
	}
	if opt.Backoff <= 0 {
		opt.Backoff = 100 * time.Millisecond
	}
	if opt.MaxBackoff < opt.Backoff {
		opt.MaxBackoff = max(opt.Backoff, 30*time.Second)
	}
	return &lane{opt: opt, s: s, log: log, ch: make(chan *step.Record, opt.Size), done: make(chan struct{})}
}

// offer queues r without blocking; a full queue drops it.
func (l *lane) offer(r *step.Record) {
	l.stats.Queued.Add(1)
	select {
	case l.ch <- r:
	default:
		l.stats.Queued.Add(-1)
		l.drop(r.Step, "queue full", nil)
	}
}

// drop counts a record given up, and logs the first one of each episode: an episode ends when
// the lane has caught up (see run).
func (l *lane) drop(n int64, reason string, err error) {
	l.stats.Dropped.Add(1)
	if !l.dropping.Swap(true) {
		args := []any{"sink", l.opt.Name, "step", n, "reason", reason}
		if err != nil {
			args = append(args, "err", err)
		}
		l.log.Warn("sink dropping steps", args...)
	}
}

// run delivers the queued records in order until the queue is closed; once ctx ends (the exit
// deadline) it drops what is left without trying.
func (l *lane) run(ctx context.Context) {
	defer close(l.done)
	defer func() {
		if l.graceCancel != nil {
			l.graceCancel()
		}
	}()
	defer func() {
		for _, n := range l.next {
			close(n.ch)
		}
	}()
	for r := range l.ch {
		l.stats.Queued.Add(-1)
		if ctx.Err() != nil {
			// Past the exit deadline a queued record still gets one write attempt (and no
			// plots), so that a sink that was only slow (plots drawn on a busy machine) loses
			// nothing, while a failing one holds the exit for lastTryTime at most.
			if l.grace == nil {
				l.grace, l.graceCancel = context.WithTimeout(context.Background(), lastTryTime)
			}
			if l.prep != nil {
				l.prepare(ctx, r) // no drawing past the deadline: the record passes on as it is
			} else {
				l.lastTry(r)
			}
			continue
		}
		if l.prep != nil {
			l.prepare(ctx, r)
			continue
		}
		if l.deliver(ctx, r) && len(l.ch) == 0 && l.dropping.Swap(false) {
			l.log.Info("sink caught up", "sink", l.opt.Name, "step", r.Step, "dropped_total", l.stats.Dropped.Load())
		}
	}
}

// deliver writes r, retrying with backoff, and reports whether r was written.
func (l *lane) deliver(ctx context.Context, r *step.Record) bool {
	delay := l.opt.Backoff
	for attempt := 0; ; attempt++ {
		err := l.s.Write(ctx, r)
		if err == nil {
			l.stats.Written.Add(1)
			l.setFailing(false, r.Step, nil)
			return true
		}
		l.stats.Errors.Add(1)
		l.setFailing(true, r.Step, err)
		if l.opt.MaxRetries > 0 && attempt >= l.opt.MaxRetries {
			l.drop(r.Step, "retries exhausted", err)
			return false
		}
		if !sleep(ctx, min(max(delay, retryDelay(err)), l.opt.MaxBackoff)) {
			l.drop(r.Step, "exit deadline", err)
			return false
		}
		delay = min(2*delay, l.opt.MaxBackoff)
	}
}

// lastTry writes r once within the lane's grace time, and drops it if that fails.
func (l *lane) lastTry(r *step.Record) {
	if err := l.s.Write(l.grace, r); err != nil {
		l.stats.Errors.Add(1)
		l.drop(r.Step, "exit deadline", err)
		return
	}
	l.stats.Written.Add(1)
}

// prepare runs the prepare stage on r and hands what it returns to the image lanes. A failure
// is logged as a sink's is, but not retried: the record passes on without what failed.
func (l *lane) prepare(ctx context.Context, r *step.Record) {
	c, err := l.prep.Prepare(ctx, r, len(l.ch))
	if err != nil {
		l.stats.Errors.Add(1)
	} else {
		l.stats.Written.Add(1)
	}
	l.setFailing(err != nil, r.Step, err)
	if c == nil {
		c = r
	}
	for _, n := range l.next {
		n.offer(c)
	}
}

// setFailing logs the transitions between working and failing, once each.
func (l *lane) setFailing(failing bool, n int64, err error) {
	switch {
	case failing && !l.failing && l.prep != nil:
		l.log.Warn("sink stage failing; steps pass on without its output", "sink", l.opt.Name, "step", n, "err", err)
	case failing && !l.failing:
		l.log.Warn("sink failing; retrying with backoff", "sink", l.opt.Name, "step", n, "err", err)
	case !failing && l.failing:
		l.log.Info("sink recovered", "sink", l.opt.Name, "step", n)
	}
	l.failing = failing
}

// sleep waits for d, or returns false as soon as ctx ends.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
