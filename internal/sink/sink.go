// Package sink delivers closed step records to their destinations: steps.jsonl and the trackers.
package sink

import (
	"context"

	"github.com/vllmstat/vllmstat/internal/step"
)

// Sink receives every closed step, in order.
type Sink interface {
	Write(ctx context.Context, r *step.Record) error
	Close(ctx context.Context) error
}
