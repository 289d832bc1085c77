// Package sink delivers closed step records to their destinations: steps.jsonl and the trackers.
// A Runtime owns the delivery: one bounded queue and goroutine per sink, retries with backoff,
// the plot drawing in front of the sinks that log images, and the drain at exit.
package sink

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// Sink receives every closed step, in step order.
//
// The record is immutable and shared: the same *step.Record goes to every sink (and to the
// collector's own consumers) from several goroutines at once, so a sink must not modify it, nor
// anything it points to, and must copy what it keeps past Write.
//
// Lifecycle: the run creates its sinks and hands them to one Runtime, which owns them from then
// on. The Runtime calls Write from a single goroutine per sink, never concurrently, and calls
// Close exactly once, after the last Write returned, even when Write was never called. A
// constructor starts no goroutine; a sink that needs one starts it in Start (see Starter). Close
// must release everything; it is idempotent all the same, so that a sink closed by a test and
// by its owner does no harm.
//
// Contexts: the context given to Write is cancelled when the run's exit deadline passes; a
// Write that waits (on the network, say) must return then. Close's context carries the same
// deadline: what a sink cannot flush by then it gives up, reporting what was lost in its error.
//
// Errors: a Write error means the step was not delivered and is worth another try: the Runtime
// retries the same record with backoff (see RetryAfter) until it succeeds, the sink's retry
// limit is reached, or the exit deadline passes. A sink that gives up on a record for good
// (a receiver rejecting it, say) counts and logs that itself and returns nil.
type Sink interface {
	Write(ctx context.Context, r *step.Record) error
	Close(ctx context.Context) error
}

// IntervalSink is a Sink that also takes every worker's interval values (remote write's
// per-interval samples). Interval is called on the collector goroutine, in scrape order, and
// must not block: the sink buffers the values and sends them from its own goroutine. iv is
// shared as records are. Interval may be called before Start and after Close; it then drops iv.
type IntervalSink interface {
	Sink
	Interval(iv step.Interval)
}

// Starter is a Sink with work of its own to run (a sender goroutine, say). The Runtime calls
// Start once, from its own Start, before the first Write; the work stops in Close.
type Starter interface {
	Start()
}

// Backoffer is a Sink that sets its own retry delays (a network sink's configured backoff);
// other sinks get the Runtime's defaults.
type Backoffer interface {
	Backoff() (first, max time.Duration)
}

// Preparer turns a record into the one that the sinks logging images get (the plot stage draws
// the step's images and returns a copy of the record with their paths). The Runtime calls it
// once per record, on its own goroutine, in step order. waiting is how many records are queued
// behind r, so that a preparer falling behind can skip work; ctx is cancelled at the exit
// deadline. It returns a record to pass on even when it fails.
type Preparer interface {
	Prepare(ctx context.Context, r *step.Record, waiting int) (*step.Record, error)
}

// Stats are a sink's counters, safe to read from any goroutine.
type Stats struct {
	Queued  atomic.Int64 // records waiting now
	Written atomic.Int64
	Errors  atomic.Int64 // failed attempts
	Dropped atomic.Int64 // records given up: queue full, retries exhausted, or not written by the exit deadline
}

// RetryAfter wraps err, a failed Write, with the delay the destination asked for (an HTTP
// Retry-After); the Runtime waits at least that long, up to the sink's maximum backoff.
func RetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, d: d}
}

type retryAfterError struct {
	err error
	d   time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// retryDelay is the delay err asks for, or 0.
func retryDelay(err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.d
	}
	return 0
}
