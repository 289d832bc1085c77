package plot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
	// Backlog is how many steps may wait to be drawn; a step that finds the backlog full
	// passes on to the next sinks without a timeline file or images. 0 means 4.
	Backlog int
	// Queue is how many records may wait in all, drawn or not; a record that finds the queue
	// full is dropped (counted). 0 means 1024 more than Backlog.
	Queue int
	// Plot sizes the images.
	Plot Options
}

// StageStats are a Stage's counters, safe to read from any goroutine.
type StageStats struct {
	Rendered atomic.Int64 // steps whose timeline file and images were written
	Skipped  atomic.Int64 // steps passed on without them: backlog full, or closing
	Dropped  atomic.Int64 // steps not passed on at all: the queue to the next sinks was full
	Errors   atomic.Int64 // failed file writes and failed writes to the next sinks
}

// Stage writes each step's timeline file and images on its own goroutine, then hands a copy of
// the record, with Plots set to the images' paths, to the next sinks (the trackers that log
// images). Write never blocks, so closing a step does not wait for any drawing; the records
// reach the next sinks in step order. Stage owns the next sinks: its Close closes them.
type Stage struct {
	outDir string
	opt    StageOptions
	next   []sink.Sink
	log    *slog.Logger
	rd     *Renderer

	mu      sync.Mutex // guards closed and sending on ch
	closed  bool
	ch      chan job
	pending atomic.Int64 // render jobs in ch
	stop    atomic.Bool  // set when Close's deadline passes: draw nothing more
	done    chan struct{}
	once    sync.Once
	err     error
	stats   StageStats

	behind  atomic.Bool // logged "falling behind" and not yet caught up
	failing bool        // owned by the loop: the last write failed
}

type job struct {
	r      *step.Record
	render bool
}

// NewStage starts the goroutine that draws into outDir and feeds next. log may be nil.
func NewStage(outDir string, opt StageOptions, next []sink.Sink, log *slog.Logger) *Stage {
	if opt.Backlog <= 0 {
		opt.Backlog = 4
	}
	if opt.Queue <= opt.Backlog {
		opt.Queue = opt.Backlog + 1024
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Stage{
		outDir: outDir,
		opt:    opt,
		next:   next,
		log:    log,
		rd:     NewRenderer(opt.Plot),
		ch:     make(chan job, opt.Queue),
		done:   make(chan struct{}),
	}
	go s.loop()
	return s
}

// Stats returns the stage's counters.
func (s *Stage) Stats() *StageStats { return &s.stats }

// Write queues r without blocking. It draws r only if the backlog has room; otherwise r passes
// on without a timeline file or images (counted as skipped). r itself is never modified.
func (s *Stage) Write(_ context.Context, r *step.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("plot stage: closed, step %d dropped", r.Step)
	}
	j := job{r: r, render: s.opt.Plots || s.opt.Timelines}
	if j.render && s.pending.Load() >= int64(s.opt.Backlog) {
		j.render = false
		s.stats.Skipped.Add(1)
		if !s.behind.Swap(true) {
			s.log.Warn("plot stage behind; steps pass on without timelines and plots", "step", r.Step, "backlog", s.opt.Backlog)
		}
	}
	select {
	case s.ch <- j:
		if j.render {
			s.pending.Add(1)
		}
		return nil
	default:
		s.stats.Dropped.Add(1)
		return fmt.Errorf("plot stage: queue full, step %d dropped", r.Step)
	}
}

func (s *Stage) loop() {
	defer close(s.done)
	for j := range s.ch {
		c := *j.r // the shallow copy that the next sinks get
		var errs []error
		if j.render {
			s.pending.Add(-1)
			if s.stop.Load() {
				s.stats.Skipped.Add(1)
			} else {
				var err error
				if c.Plots, err = s.render(j.r); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for _, n := range s.next {
			if err := n.Write(context.Background(), &c); err != nil {
				s.stats.Errors.Add(1)
				errs = append(errs, err)
			}
		}
		s.result(c.Step, errors.Join(errs...))
	}
}

// render writes r's timeline file and images and returns the paths of the images written.
func (s *Stage) render(r *step.Record) ([]string, error) {
	if _, err := timeline.Write(s.outDir, r); err != nil {
		s.stats.Errors.Add(1)
		return nil, err
	}
	var rels []string
	if s.opt.Plots {
		var err error
		if rels, err = s.rd.writeFiles(s.outDir, r, s.stop.Load); err != nil {
			s.stats.Errors.Add(1)
			return rels, err
		}
	}
	s.stats.Rendered.Add(1)
	if s.pending.Load() == 0 && s.behind.Swap(false) {
		s.log.Info("plot stage caught up", "step", r.Step)
	}
	return rels, nil
}

// result logs the changes between failing and working once each.
func (s *Stage) result(n int64, err error) {
	switch {
	case err != nil && !s.failing:
		s.failing = true
		s.log.Warn("plot stage failing", "step", n, "err", err)
	case err == nil && s.failing:
		s.failing = false
		s.log.Info("plot stage recovered", "step", n)
	}
}

// Close stops accepting records and waits until every queued record has been passed on, or
// until ctx ends, after which the records left pass on without drawing; then it closes the
// next sinks with ctx.
func (s *Stage) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.ch)
		s.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			s.stop.Store(true)
			s.log.Warn("plot stage not drained before the deadline; passing the rest on without plots", "left", len(s.ch))
			<-s.done
		}
		var errs []error
		for _, n := range s.next {
			if err := n.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}
