package sink

import (
	"context"

	"github.com/vllmstat/vllmstat/internal/step"
)

// Lazy is a sink that could not be opened at start (an unwritable directory, say). Each Write
// tries to open it again first, so the sink runtime retries with backoff, logs the failure once
// and counts it, and the run goes on; once the sink opens, it gets every step still queued.
type Lazy struct {
	open func() (Sink, error)
	s    Sink
}

// NewLazy returns a sink opened by open on first successful use.
func NewLazy(open func() (Sink, error)) *Lazy { return &Lazy{open: open} }

// Write opens the sink if needed and writes r.
func (l *Lazy) Write(ctx context.Context, r *step.Record) error {
	if l.s == nil {
		s, err := l.open()
		if err != nil {
			return err
		}
		l.s = s
	}
	return l.s.Write(ctx, r)
}

// Close closes the sink if it was ever opened.
func (l *Lazy) Close(ctx context.Context) error {
	if l.s == nil {
		return nil
	}
	return l.s.Close(ctx)
}
