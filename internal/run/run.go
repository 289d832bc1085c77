// Package run builds vllmstat's pipeline from a configuration and owns the one order in which
// its parts start and stop: the out_dir's lock, the API's address, steps.jsonl, the recording,
// the sinks, the API server, discovery and the collector. Each starts after what it needs and
// stops before it, so that the collector's last step (after a last boundary scrape) reaches
// the sinks, the sinks are drained, and only then the API stops answering and the out_dir is
// let go. It also holds the runtime policy: how a fleet's scrapes are spread, the API's
// timeouts, how long the exit waits, the garbage collector's target. The commands (package cli)
// parse flags, print, and call it.
package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/vllmstat/vllmstat/internal/api"
	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/discovery"
	"github.com/vllmstat/vllmstat/internal/outdir"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Options are what a command adds to the configuration.
type Options struct {
	// Logger gets the run's log; nil logs nothing.
	Logger *slog.Logger
	// Fresh starts steps.jsonl anew (the demo) instead of continuing its steps.
	Fresh bool
	// NoFinalStep leaves the step open at exit unclosed, with no last boundary scrape and no
	// open-step.json: a caller that ends every step itself (the demo) has no step left open.
	NoFinalStep bool
	// OnStep is told of every closed step after the sinks, on the collector's goroutine (a
	// command's summary line); it must not block. nil: nothing.
	OnStep func(*step.Record)
}

// Pipeline is one run: New assembles its parts, Start starts them in order, Stop stops them in
// the reverse order.
type Pipeline struct {
	cfg   config.Config
	opt   Options
	log   *slog.Logger
	group Group
	self  *selfmetrics.Metrics

	// Set by the parts as they start, each read only by the parts after it.
	lock    *outdir.Lock
	ln      net.Listener // nil without an API
	planned []plannedSink
	steps   *sink.JSONL
	resume  bool  // steps.jsonl held steps: the run continues them
	after   int64 // the last of them
	rw      *record.Writer
	sinks   *sink.Runtime // owns steps once set
	c       *collector.Collector
	srv     *http.Server
	served  chan error
	disc    *discovery.Manager

	delivering bool // the sinks run: draining them closes them
	collecting bool // the collector runs: it closes the recording
}

// New assembles the pipeline of cfg. Nothing is checked, opened or started before Start.
func New(cfg config.Config, opt Options) *Pipeline {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{cfg: cfg, opt: opt, log: opt.Logger}
	p.self = selfmetrics.New(selfmetrics.Options{Prefix: cfg.MetricPrefix, Logger: p.log})
	// What can refuse a run comes first, in this order: the out_dir's lock (another run writing
	// there), the API's address, the sinks' settings. Only then are steps.jsonl, the recording
	// and the sinks' files created, so that a run refused at start changes nothing.
	p.group.Add(p.lockOutDir, func(context.Context) error { return p.lock.Release() }) // after the last write to the out_dir
	if cfg.Listen != "" {
		p.group.Add(p.listen, p.closeListener)
	}
	p.group.Add(p.checkSinks, nil)
	p.group.Add(p.openSteps, p.closeSteps)
	if cfg.Record != "" {
		p.group.Add(p.openRecording, p.closeRecording)
	}
	p.group.Add(p.assemble, p.closeSinks)
	// Then what runs, the collector last: stopping it closes the last step, which the sinks
	// then drain; discovery and the API (whose callers wait for that step) stop after them.
	if cfg.Listen != "" {
		p.group.Add(p.serve, p.shutdownAPI)
	}
	if cfg.HasDiscovery() {
		p.group.Add(background(func(ctx context.Context) error { return p.disc.Run(ctx) }))
	}
	p.group.Add(p.deliver, p.drain)
	collect, stopCollecting := background(func(ctx context.Context) error { return p.c.Run(ctx) })
	p.group.Add(func(ctx context.Context) error {
		p.collecting = true
		return collect(ctx)
	}, stopCollecting)
	return p
}

// Start starts the pipeline; its collector and discovery run until ctx ends or Stop. When a
// part cannot start, those started are stopped again and Start returns why: a config.Problems
// for bad settings.
func (p *Pipeline) Start(ctx context.Context) error { return p.group.Start(ctx) }

// Stop stops the pipeline: the collector closes the open step (after a last boundary scrape)
// and the recording, the sinks are drained, then discovery, the API and the lock end. It
// returns every failure, joined.
func (p *Pipeline) Stop(ctx context.Context) error { return p.group.Stop(ctx) }

// Run starts the pipeline, runs it until ctx ends, and stops it.
func (p *Pipeline) Run(ctx context.Context) error {
	if err := p.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return p.Stop(context.WithoutCancel(ctx))
}

// Collector is the pipeline's collector, to end steps and mark phases; nil before Start.
func (p *Pipeline) Collector() *collector.Collector { return p.c }

// Addr is the API's address, or "" without one.
func (p *Pipeline) Addr() string {
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

func (p *Pipeline) lockOutDir(context.Context) error {
	lock, err := outdir.Acquire(p.cfg.OutDir, outdir.Self(time.Now()))
	if err != nil {
		return err
	}
	p.lock = lock
	return nil
}

func (p *Pipeline) listen(context.Context) error {
	ln, err := net.Listen("tcp", p.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen for the API on %s: %w", p.cfg.Listen, err)
	}
	if err := p.lock.SetAPI(ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	p.ln = ln
	return nil
}

// onLoopback reports that ln listens on a loopback address. Callers of an API that listens on a
// network address without a token (allow_insecure_listen) name it as they reach it: by the
// node's name or address, which the API cannot know; on loopback, only localhost or a loopback
// address name it.
func onLoopback(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// closeListener closes the API's address, which the API server's shutdown closed already if it
// served.
func (p *Pipeline) closeListener(context.Context) error {
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func (p *Pipeline) checkSinks(context.Context) error {
	planned, err := parseSinks(p.cfg, p.log)
	p.planned = planned
	return err
}

func (p *Pipeline) openSteps(ctx context.Context) error {
	path := filepath.Join(p.cfg.OutDir, "steps.jsonl")
	var held []heldStep
	if p.opt.Fresh {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else {
		if n := p.cfg.ResumeFrom; n != nil {
			if err := cutAfter(path, *n, p.planned, p.log); err != nil {
				return err
			}
		}
		var err error
		if held, err = sinkSteps(p.planned); err != nil {
			return err
		}
	}
	steps, err := sink.OpenJSONL(path, sink.JSONLOptions{Logger: p.log})
	if err != nil {
		return err
	}
	// An out_dir that holds steps is a run resumed (a trainer restarted from a checkpoint): its
	// steps go on after the last one, in steps.jsonl and in every sink, on one step axis. Read
	// once steps.jsonl is open, which repairs a last line a killed run left; the sinks' files
	// count too, when they hold steps that steps.jsonl does not.
	after, resume, err := lastStep(path)
	if err != nil {
		steps.Close(ctx)
		return err
	}
	after, resume = continueAfterSinks(held, path, after, resume, p.log)
	p.self.AddStepsFile(steps.Stats())
	p.steps, p.after, p.resume = steps, after, resume
	if resume {
		p.log.Info("continuing the steps of the out_dir: step numbers go on after its last step", "steps", path, "last_step", after)
	}
	return nil
}

// closeSteps closes steps.jsonl unless the sinks own it by now.
func (p *Pipeline) closeSteps(ctx context.Context) error {
	if p.sinks != nil {
		return nil
	}
	return p.steps.Close(ctx)
}

func (p *Pipeline) openRecording(context.Context) error {
	rw, err := record.Create(p.cfg.Record, record.WriterOptions{Logger: p.log, ResumeFrom: p.cfg.ResumeFrom})
	if err != nil {
		return err
	}
	if rw.Path() != p.cfg.Record {
		p.log.Info("recording exists; writing its next segment (replay reads them all)", "recording", p.cfg.Record, "segment", rw.Path())
	}
	p.self.AddRecording(rw.Stats())
	p.rw = rw
	return nil
}

// closeRecording closes the recording unless the collector ran: its last events are the
// collector's, which closes it when it stops.
func (p *Pipeline) closeRecording(context.Context) error {
	if p.collecting {
		return nil
	}
	return p.rw.Close()
}

// assemble opens the sinks and builds the collector, the API server and discovery around them;
// none of them runs yet.
func (p *Pipeline) assemble(context.Context) error {
	cfg := p.cfg
	p.sinks = buildSinks(cfg, p.planned, p.steps, p.self, p.log, p.resume)
	opt := collectorOptions(cfg)
	opt.StepEvery = cfg.StepEvery
	opt.Tracker = trackerOptions(cfg)
	opt.Tracker.OnInterval = func(iv step.Interval) {
		p.self.Interval(iv)
		p.sinks.Interval(iv)
	}
	opt.Recorder = p.rw
	opt.Observer = p.self
	opt.Sinks = []sink.Sink{p.sinks}
	opt.OnStep = p.opt.OnStep
	opt.NoFinalStep = p.opt.NoFinalStep
	if !p.opt.NoFinalStep {
		opt.OnOpenStep = func(rec *step.Record) { writeOpenStep(cfg, rec, p.log) }
	}
	opt.Resume, opt.ResumeAfter = p.resume, p.after
	opt.Logger = p.log
	// Targets without credentials: those discovery finds get the top-level ones, those added
	// through the API only where the config allows it.
	opt.DefaultAuth = cfg.Auth
	opt.APIAuth = apiAuth(cfg, p.log)
	opt.Servers = serverRules(cfg, p.ln)
	p.c = collector.New(opt)
	if p.ln != nil {
		p.srv = &http.Server{
			Handler: api.New(api.Options{Collector: p.c, Token: cfg.APIToken.Reveal(), MetricsPublic: cfg.MetricsPublic,
				AnyHost: !onLoopback(p.ln), Targets: targetPolicy(cfg, p.ln), Metrics: p.self.Handler(), Report: report.Handler(cfg.OutDir, nil), Logger: p.log}),
			ReadHeaderTimeout: apiReadHeaderTimeout,
			ReadTimeout:       apiReadTimeout,
			WriteTimeout:      apiWriteTimeout(cfg.Timeout()),
			IdleTimeout:       apiIdleTimeout,
		}
	}
	if cfg.HasDiscovery() {
		p.disc = newDiscovery(cfg, p.c, p.log)
	}
	p.log.Info("scraping", "targets", len(cfg.Targets), "interval_s", cfg.Interval, "step_every", cfg.StepEvery, "out", cfg.OutDir)
	if len(cfg.Targets) == 0 && !cfg.HasDiscovery() {
		p.log.Info("no targets yet: waiting for them through the API (POST /v1/targets, or expose() in the Python client)", "url", "http://"+p.Addr()+"/v1/targets")
	}
	return nil
}

// closeSinks closes the sinks (and steps.jsonl with them) if they never ran; once they ran,
// draining them closed them.
func (p *Pipeline) closeSinks(ctx context.Context) error {
	if p.delivering {
		return nil
	}
	return p.sinks.Close(ctx)
}

func (p *Pipeline) serve(context.Context) error {
	p.log.Info("api listening", "url", "http://"+p.Addr())
	p.served = make(chan error, 1)
	go func() { p.served <- p.srv.Serve(p.ln) }()
	return nil
}

// shutdownAPI stops the API server once its callers have had the last step. A request still
// running after apiShutdownTimeout is cut off; that is no failure of the run.
func (p *Pipeline) shutdownAPI(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, apiShutdownTimeout)
	defer cancel()
	p.srv.Shutdown(sctx)
	if err := <-p.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api server: %w", err)
	}
	return nil
}

func (p *Pipeline) deliver(context.Context) error {
	p.sinks.Start()
	p.delivering = true
	return nil
}

// drain closes the sinks once the collector has written its last step, within drainTimeout.
func (p *Pipeline) drain(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	return p.sinks.Close(dctx)
}

// background is the start and stop of a part that runs on a goroutine of its own until its
// context ends: stop ends it and returns what run returned.
func background(run func(context.Context) error) (start, stop func(context.Context) error) {
	var cancel context.CancelFunc
	var done chan error
	start = func(ctx context.Context) error {
		ctx, cancel = context.WithCancel(ctx)
		done = make(chan error, 1)
		go func() { done <- run(ctx) }()
		return nil
	}
	stop = func(context.Context) error {
		cancel()
		return <-done
	}
	return start, stop
}

// collectorOptions are the collector's settings that come from the configuration alone, the
// same for a run and a live view.
func collectorOptions(cfg config.Config) collector.Options {
	return collector.Options{
		Options: scrape.Options{
			Timeout: cfg.Timeout(),
			Spread:  spread(cfg.IntervalDuration()),
			Burst:   burst,
			MaxBody: cfg.MaxBodyBytes,
			Limits:  cfg.Limits(),

			WorkerLabels: cfg.WorkerLabels, // as replay's --worker-labels, with the same default

			// How pages are asked for: compressed or not, and only the samples vllmstat reads.
			Compression:  cfg.Compression,
			RequestNames: cfg.RequestNames,

			AfterFirstPages: returnStartMemory,
		},
		Boundary: boundaryGC,
		Targets:  cfg.Targets,
		Interval: cfg.IntervalDuration(),
	}
}

func trackerOptions(cfg config.Config) step.Options {
	// A run that draws, writes and prints no timelines need not keep their samples.
	noTimeline := !cfg.TimelinePlots && !cfg.RecordTimelines && !cfg.TerminalTimelines
	return step.Options{Prefix: cfg.MetricPrefix, PerWorker: cfg.PerWorker, Scalars: cfg.LogScalars, NoTimeline: noTimeline, Peak: cfg.Peak()}
}
