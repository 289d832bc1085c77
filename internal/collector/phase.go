package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
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

// StartPhase opens phase name after a boundary scrape of every target, so that every scrape's
// increases fall wholly inside or outside it, and returns once it took effect. A phase of
// another name that is open ends then; starting the open phase changes nothing.
func (c *Collector) StartPhase(ctx context.Context, name string) (PhaseEdge, error) {
	return c.phaseQuery(ctx, queryPhaseStart, name)
}

// EndPhase ends phase name, which must be open (or being opened by an earlier StartPhase), after
// a boundary scrape of every target, and returns once it took effect.
func (c *Collector) EndPhase(ctx context.Context, name string) (PhaseEdge, error) {
	return c.phaseQuery(ctx, queryPhaseEnd, name)
}

func (c *Collector) phaseQuery(ctx context.Context, kind int, name string) (PhaseEdge, error) {
	if err := step.ValidPhase(name); err != nil {
		return PhaseEdge{}, fmt.Errorf("%w: %v", ErrPhaseName, err)
	}
	reply := make(chan endResult, 1)
	tp := TraceParent(ctx)
	if err := c.call(ctx, func(s *state) { s.requestPhase(kind, name, tp, reply) }); err != nil {
		return PhaseEdge{}, err
	}
	r := c.wait(ctx, reply)
	return r.edge, r.err
}

// requestPhase queues a phase edge. Whether a phase may end is decided here, against the phase
// that will be open once every edge queued before it took effect, so that a wrong end fails at
// once rather than after a boundary scrape.
func (s *state) requestPhase(kind int, name, traceparent string, reply chan endResult) {
	if kind == queryPhaseEnd {
		if s.phase != name {
			open := "no phase is open"
			if s.phase != "" {
				open = fmt.Sprintf("the open phase is %q", s.phase)
			}
			reply <- endResult{err: fmt.Errorf("end phase %q: %w (%s)", name, ErrPhaseNotOpen, open)}
			return
		}
		s.phase = ""
	} else {
		s.phase = name
	}
	s.enqueue(endQuery{kind: kind, phase: name, trace: traceparent, reply: reply})
}

// phaseEdge makes the phase edge q take effect at ts, after its boundary scrapes.
func (s *state) phaseEdge(q endQuery, ts time.Time) {
	if q.trace != "" { // the trainer's span, for a step end that names none
		s.phaseTrace = q.trace
	}
	edge := PhaseEdge{Phase: q.phase, TS: ts}
	changed := false
	if q.kind == queryPhaseStart {
		edge.Edge = record.EdgeStart
		if open := s.tracker.Phase(); open != q.phase {
			edge.Ended = open
			s.tracker.StartPhase(q.phase, ts)
			changed = true
		}
	} else {
		edge.Edge = record.EdgeEnd
		changed = s.tracker.EndPhase(q.phase, ts)
	}
	if rw := s.c.opt.Recorder; rw != nil && changed {
		s.recordFailed(rw.PhaseEdge(ts, q.phase, edge.Edge))
	}
	if q.reply != nil {
		q.reply <- endResult{edge: edge}
	}
}
