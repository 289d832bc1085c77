package plot

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// StageOptions configure a Stage.
type StageOptions struct {
	// Plots draws the PNG images (vllm_metrics_log_timeline_plots).
	Plots bool
	// Timelines writes the timeline files (record_timelines); they are written whenever
	// Plots is on too.
	Timelines bool
	// Backlog is how many steps may wait to be drawn; a step with more waiting behind it
	// passes on to the image sinks without a timeline file or images. 0 means 4.
	Backlog int
	// Plot sizes the images.
	Plot Options
}

// StageStats are a Stage's counters, safe to read from any goroutine.
type StageStats struct {
	Rendered atomic.Int64 // steps whose timeline file and images were written
	Skipped  atomic.Int64 // steps passed on without them: too many waiting, or past the exit deadline
	Errors   atomic.Int64 // failed file writes
}

// Stage is the sink runtime's prepare step (a sink.Preparer): it writes each step's timeline
// file and images, and returns a copy of the record with Plots set to the images' paths, which
// the sinks that log images get. The runtime calls it on its own goroutine, once per record, so
// closing a step never waits for any drawing; the records it is given are never modified.
type Stage struct {
	outDir string
	opt    StageOptions
	log    *slog.Logger
	rd     *Renderer
	stats  StageStats
	behind bool // logged "behind" and not caught up since; owned by Prepare's goroutine
}

var _ sink.Preparer = (*Stage)(nil)

// NewStage returns a Stage that draws into outDir. log may be nil.
func NewStage(outDir string, opt StageOptions, log *slog.Logger) *Stage {
	if opt.Backlog <= 0 {
		opt.Backlog = 4
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stage{outDir: outDir, opt: opt, log: log, rd: NewRenderer(opt.Plot)}
}

// Stats returns the stage's counters.
func (s *Stage) Stats() *StageStats { return &s.stats }

// Prepare draws r unless more than the backlog waits behind it or ctx has ended, and returns
// the copy of r that the image sinks get, with the paths of the images written.
func (s *Stage) Prepare(ctx context.Context, r *step.Record, waiting int) (*step.Record, error) {
	c := *r // the shallow copy that the image sinks get
	if !s.opt.Plots && !s.opt.Timelines {
		return &c, nil
	}
	if ctx.Err() != nil || waiting >= s.opt.Backlog {
		s.stats.Skipped.Add(1)
		if ctx.Err() == nil && !s.behind {
			s.behind = true
			s.log.Warn("plot stage behind; steps pass on without timelines and plots", "step", r.Step, "backlog", s.opt.Backlog)
		}
		return &c, nil
	}
	var err error
	c.Plots, err = s.render(ctx, r)
	if err == nil && waiting == 0 && s.behind {
		s.behind = false
		s.log.Info("plot stage caught up", "step", r.Step)
	}
	return &c, err
}

// render writes r's timeline file and images and returns the paths of the images written.
func (s *Stage) render(ctx context.Context, r *step.Record) ([]string, error) {
	if _, err := timeline.Write(s.outDir, r); err != nil {
		s.stats.Errors.Add(1)
		return nil, err
	}
	var rels []string
	if s.opt.Plots {
		var err error
		if rels, err = s.rd.writeFiles(s.outDir, r, func() bool { return ctx.Err() != nil }); err != nil {
			s.stats.Errors.Add(1)
			return rels, err
		}
	}
	s.stats.Rendered.Add(1)
	return rels, nil
}
