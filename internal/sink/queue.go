package sink

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// QueueOptions configure a Queue.
type QueueOptions struct {
	Name       string        // for logs and self-metrics, e.g. "tensorboard"
	Size       int           // records waiting at most; beyond, new records are dropped and counted
	MaxRetries int           // attempts after the first; 0 means retry until Close's deadline
	Backoff    time.Duration // first retry delay, doubled up to MaxBackoff
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

// Stats are a queue's counters, safe to read from any goroutine.
type Stats struct {
	Queued  atomic.Int64 // records waiting now
	Written atomic.Int64
	Errors  atomic.Int64 // failed attempts
	Dropped atomic.Int64 // records given up: queue full, retries exhausted, or undrained at Close
}

// Queue runs a sink on its own goroutine behind a bounded queue, so that a slow or failing sink
// never blocks step close or the other sinks. A failing write is retried with exponential
// backoff; the sink's state changes (failing, recovered) are logged once each.
type Queue struct {
	opt   QueueOptions
	next  Sink
	ch    chan *step.Record
	stats Stats
	stop  chan struct{} // closed by Close: stop waiting between retries
	done  chan struct{}
	once  sync.Once
	err   error // Close's result from next.Close
}

// NewQueue starts the goroutine that feeds next.
func NewQueue(next Sink, opt QueueOptions) *Queue {
	if opt.Size <= 0 {
		opt.Size = 1024
	}
	if opt.Backoff <= 0 {
		opt.Backoff = 100 * time.Millisecond
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = 30 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	q := &Queue{opt: opt, next: next, ch: make(chan *step.Record, opt.Size), stop: make(chan struct{}), done: make(chan struct{})}
	go q.loop()
	return q
}

// Stats returns the queue's counters.
func (q *Queue) Stats() *Stats { return &q.stats }

// Name returns the sink's name.
func (q *Queue) Name() string { return q.opt.Name }

// Write enqueues r without blocking (it must not be called after Close); a full queue drops it (counted, and logged once per
// episode).
func (q *Queue) Write(_ context.Context, r *step.Record) error {
	select {
	case q.ch <- r:
		q.stats.Queued.Add(1)
		return nil
	default:
		if q.stats.Dropped.Add(1) == 1 {
			q.opt.Logger.Warn("sink queue full; dropping steps", "sink", q.opt.Name, "step", r.Step)
		}
		return errors.New("sink " + q.opt.Name + ": queue full, step dropped")
	}
}

func (q *Queue) loop() {
	defer close(q.done)
	failing := false
	for r := range q.ch {
		q.stats.Queued.Add(-1)
		delay := q.opt.Backoff
		for attempt := 0; ; attempt++ {
			err := q.next.Write(context.Background(), r)
			if err == nil {
				q.stats.Written.Add(1)
				if failing {
					failing = false
					q.opt.Logger.Info("sink recovered", "sink", q.opt.Name, "step", r.Step)
				}
				break
			}
			q.stats.Errors.Add(1)
			if !failing {
				failing = true
				q.opt.Logger.Warn("sink failing; retrying with backoff", "sink", q.opt.Name, "step", r.Step, "err", err)
			}
			if q.opt.MaxRetries > 0 && attempt >= q.opt.MaxRetries {
				q.stats.Dropped.Add(1)
				q.opt.Logger.Error("sink gave up on a step", "sink", q.opt.Name, "step", r.Step, "err", err)
				break
			}
			if !q.wait(delay) {
				q.stats.Dropped.Add(1) // closing: the last attempt failed; move on so Close can finish
				break
			}
			delay = min(2*delay, q.opt.MaxBackoff)
		}
	}
}

// wait sleeps for d, or returns false at once when Close has given up waiting.
func (q *Queue) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-q.stop:
		return false
	}
}

// Close stops accepting records, drains the queue until ctx's deadline, and closes the sink.
// Records not written by then are counted as dropped.
func (q *Queue) Close(ctx context.Context) error {
	q.once.Do(func() {
		close(q.ch)
		select {
		case <-q.done:
		case <-ctx.Done():
			close(q.stop)
			q.opt.Logger.Warn("sink not drained before the deadline", "sink", q.opt.Name, "left", q.stats.Queued.Load())
			<-q.done
		}
		q.err = q.next.Close(ctx)
	})
	return q.err
}
