package record

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Tracker is what Replay feeds a recording to; step.Tracker is one. The collector made the same
// calls, in the same order, on its own tracker when it wrote the events, so that replaying a
// recording gives the run's step records.
type Tracker interface {
	Begin(ts time.Time)
	Observe(ts time.Time, target string, page *page.Page, err error) (undated bool)
	Forget(targets ...string)
	Added(target string)
	SetTargetLabels(target string, labels map[string]string)
	StartPhase(name string, ts time.Time)
	EndPhase(name string, ts time.Time) bool
	EndStep(n int64, ts time.Time) step.Record
	Publish(v int64, ts time.Time) bool
	EngineVersion(ts time.Time, target string, v int64, reports bool)
	ServerVersion(ts time.Time, target, addr string, v int64, reports bool)
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// WorkerLabels tell a page's workers apart besides engine (see page.Options); nil means
	// page.DefaultWorkerLabels. They must be the run's for its steps to come out the same.
	WorkerLabels []string
	// OnEvent, if set, is told of every event read, before it is replayed: a gap event, which
	// replays to nothing, is only seen here.
	OnEvent func(*Event)
	// OnBadPage, if set, is told of a scrape event whose page is not Prometheus text; the
	// tracker gets it as a failed scrape, as the run's did.
	OnBadPage func(e *Event, err error)
	// OnStep, if set, gets the record of every step event; an error from it stops Replay.
	OnStep func(*step.Record) error
}

// refusedError is a recorded scrape whose connection was refused, as the run's tracker was told
// of it (step.Refused).
type refusedError string

func (e refusedError) Error() string { return string(e) }
func (e refusedError) Unwrap() error { return syscall.ECONNREFUSED }

// Replay feeds the events of r, one segment (one run), to t. It returns nil at the end of r,
// and otherwise the error that stopped it: r's (see Reader.Next; a context's end is one), a
// phase event whose name is no phase or a policy event whose version is not greater than the
// one before (with its line), or OnStep's.
func Replay(r *Reader, t Tracker, opt ReplayOptions) error {
	// Removals come in runs (a fleet leaving at once): the run forgot each run of them in one
	// pass, before the next event of another kind, and so does replay.
	var gone []string
	for {
		e, err := r.Next()
		if len(gone) > 0 && (err != nil || e.Kind != KindRemove) {
			t.Forget(gone...)
			gone = gone[:0]
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if opt.OnEvent != nil {
			opt.OnEvent(e)
		}
		switch e.Kind {
		case KindScrape:
			var pg *page.Page
			var serr error
			if e.Body != nil {
				pg, serr = page.ParsePageOptions([]byte(*e.Body), page.Options{WorkerLabels: opt.WorkerLabels})
				if serr != nil && opt.OnBadPage != nil {
					opt.OnBadPage(e, serr)
				}
			} else if e.Refused {
				serr = refusedError(e.Error)
			} else {
				serr = errors.New(e.Error)
			}
			t.Observe(e.TS, e.Target, pg, serr)
		case KindRemove:
			gone = append(gone, e.Target)
		case KindTarget:
			t.SetTargetLabels(e.Target, e.Labels)
		case KindAdd:
			t.Added(e.Target)
		case KindStart:
			t.Begin(e.TS)
		case KindPhase:
			if err := step.ValidPhase(e.Phase); err != nil {
				return fmt.Errorf("line %d: %w", r.Line(), err)
			}
			if e.Edge == EdgeStart {
				t.StartPhase(e.Phase, e.TS)
			} else {
				t.EndPhase(e.Phase, e.TS)
			}
		case KindPolicy:
			if !t.Publish(*e.Version, e.TS) {
				return fmt.Errorf("line %d: policy version %d is not greater than the one before: versions only grow", r.Line(), *e.Version)
			}
		case KindEngineVersion:
			var v int64
			if e.Version != nil {
				v = *e.Version
			}
			if e.WorkerAddr != "" {
				t.ServerVersion(e.TS, e.Target, e.WorkerAddr, v, e.Version != nil)
			} else {
				t.EngineVersion(e.TS, e.Target, v, e.Version != nil)
			}
		case KindStep:
			rec := t.EndStep(e.Step, e.TS)
			if opt.OnStep != nil {
				if err := opt.OnStep(&rec); err != nil {
					return err
				}
			}
		}
	}
}
