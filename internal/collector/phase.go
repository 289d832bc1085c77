package collector

import (
	"context"
	"errors"
	"time"
)

// PhaseEdge is what a phase edge did, once it took effect.
type PhaseEdge struct {
	Phase string    `json:"phase"`
	Edge  string    `json:"edge"` // "start" or "end"
	TS    time.Time `json:"ts"`   // when it took effect: after a boundary scrape of every target
	// Ended is the phase a start ended, when another one was open.
	Ended string `json:"ended,omitempty"`
}

// ErrPhaseName is returned for a phase name that step.ValidPhase refuses.
var ErrPhaseName = errors.New("invalid phase name")

// ErrPhaseNotOpen is returned for the end of a phase that is not open.
var ErrPhaseNotOpen = errors.New("phase is not open")

// StartPhase opens phase name after a boundary scrape of every target, ending the open phase if
// another one is open; starting the open phase again is a no-op.
func (c *Collector) StartPhase(ctx context.Context, name string) (PhaseEdge, error) {
	return PhaseEdge{}, errors.New("not implemented yet")
}

// EndPhase ends phase name, which must be open, after a boundary scrape of every target.
func (c *Collector) EndPhase(ctx context.Context, name string) (PhaseEdge, error) {
	return PhaseEdge{}, errors.New("not implemented yet")
}
