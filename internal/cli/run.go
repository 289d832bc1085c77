package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/api"
	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/outdir"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/termline"
)

const runHelp = `Usage: vllmstat run [flags]

Scrapes every target's /metrics at the interval, concurrently, and closes a step every
--step-every (and on SIGINT/SIGTERM, after a last boundary scrape). Each step is appended
to OUT/steps.jsonl as one JSON line and summarised in one line on stderr.

Flags override the config file. Examples:
  vllmstat run --target 10.0.0.1:8000 --target 10.0.0.2:8000 --interval 0.5 --step-every 30s
  vllmstat run --config grpo.yaml --record run.jsonl.gz

Flags:
`

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, "run", args, stdout, stderr)
}

// runWith is run (and record) with the context that ends it, so tests can stop it.
func runWith(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vllmstat "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	f.args = fs.Args() // targets may also be given as arguments
	cfg, err := f.load(fs)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat %s: %v\n", name, err)
		return exitUsage
	}
	if !cfg.Enabled {
		fmt.Fprintf(stderr, "vllmstat %s: %s is false (%s): scraping nothing, writing nothing\n", name, config.KeyEnable, cfg.Path(config.KeyEnable))
		return exitOK
	}
	stderr = &lockedWriter{w: stderr} // the step summaries and the log come from several goroutines
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer setGC(log)()
	if err := collect(ctx, cfg, log, stderr); err != nil {
		fmt.Fprintf(stderr, "vllmstat %s: %v\n", name, err)
		var ps config.Problems
		if errors.As(err, &ps) {
			return exitUsage
		}
		return exitError
	}
	return exitOK
}

// collect runs a collector with cfg until ctx ends.
func collect(ctx context.Context, cfg config.Config, log *slog.Logger, summary io.Writer) error {
	r, err := startRun(cfg, log, summary, false)
	if err != nil {
		return err
	}
	return r.run(ctx)
}

// running is a collector with its outputs and API server, ready to run.
type running struct {
	c      *collector.Collector
	srv    *http.Server
	ln     net.Listener
	lock   *outdir.Lock
	log    *slog.Logger
	disc   runner        // nil without discovery
	sinks  *sink.Runtime // started and closed by run
	closer []func()
}

// startRun checks everything that can stop a run from starting, in this order: the out_dir's
// lock (another run writing there), the API's address, the sinks' settings; only then does it
// create steps.jsonl, the recording and the sinks' files, so that a run refused at start
// changes nothing. fresh starts steps.jsonl anew (the demo) instead of appending to it. Nothing
// is scraped before run.
func startRun(cfg config.Config, log *slog.Logger, summary io.Writer, fresh bool) (*running, error) {
	r := &running{log: log}
	fail := func(err error) (*running, error) {
		for i := len(r.closer) - 1; i >= 0; i-- {
			r.closer[i]()
		}
		return nil, err
	}
	lock, err := outdir.Acquire(cfg.OutDir, outdir.Self(time.Now()))
	if err != nil {
		return nil, err
	}
	r.lock = lock
	r.closer = append(r.closer, func() { lock.Release() })
	if cfg.Listen != "" {
		if r.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fail(fmt.Errorf("listen for the API on %s: %w", cfg.Listen, err))
		}
		r.closer = append(r.closer, func() { r.ln.Close() })
		if err := lock.SetAPI(r.ln.Addr().String()); err != nil {
			return fail(err)
		}
	}
	planned, err := parseSinks(cfg, log)
	if err != nil {
		return fail(err)
	}
	self := selfmetrics.New(selfmetrics.Options{Prefix: cfg.MetricPrefix, Logger: log})
	stepsPath := filepath.Join(cfg.OutDir, "steps.jsonl")
	if fresh {
		if err := os.Remove(stepsPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
	}
	steps, err := sink.OpenJSONL(stepsPath, sink.JSONLOptions{Logger: log})
	if err != nil {
		return fail(err)
	}
	self.AddStepsFile(steps.Stats())
	r.closer = append(r.closer, func() { steps.Close(context.Background()) })
	// An out_dir that holds steps is a run resumed (a trainer restarted from a checkpoint): its
	// steps go on after the last one, in steps.jsonl and in every sink, on one step axis. Read
	// once steps.jsonl is open, which repairs a last line a killed run left.
	after, resume, err := lastStep(stepsPath)
	if err != nil {
		return fail(err)
	}
	if resume {
		log.Info("continuing the steps of the out_dir: step numbers go on after its last step", "steps", stepsPath, "last_step", after)
	}
	var rw *record.Writer
	if cfg.Record != "" {
		if rw, err = record.Create(cfg.Record, record.WriterOptions{Logger: log}); err != nil {
			return fail(err)
		}
		if rw.Path() != cfg.Record {
			log.Info("recording exists; writing its next segment (replay reads them all)", "recording", cfg.Record, "segment", rw.Path())
		}
		self.AddRecording(rw.Stats())
		r.closer = append(r.closer, func() { rw.Close() })
	}
	r.sinks = buildSinks(cfg, planned, steps, self, log, resume) // owns steps from here on
	topt := trackerOptions(cfg)
	topt.OnInterval = func(iv step.Interval) {
		self.Interval(iv)
		r.sinks.Interval(iv)
	}
	r.c = collector.New(collector.Options{
		Options: scrape.Options{
			Timeout: cfg.Timeout(),
			MaxBody: cfg.MaxBodyBytes,
			Limits:  cfg.Limits(),
			Logger:  log,
			// A fleet of hundreds of targets is scraped over half the interval in bursts of at
			// most about burst targets rather than all at once; a small one gains nothing from it
			// and keeps its samples aligned. The pool decides as targets come and go (discovery,
			// the API), not from the start's count.
			Spread: cfg.IntervalDuration() / 2,
			Burst:  burst,

			WorkerLabels: cfg.WorkerLabels, // as replay's --worker-labels, with the same default

			// How pages are asked for: compressed or not, and only the samples vllmstat reads.
			Compression:  cfg.Compression,
			RequestNames: cfg.RequestNames,
		},
		Targets:   cfg.Targets,
		Interval:  cfg.IntervalDuration(),
		StepEvery: cfg.StepEvery,
		Tracker:   topt,
		Recorder:  rw,
		Observer:  self,
		Sinks:     []sink.Sink{r.sinks},
		OnStep: func(rec *step.Record) {
			fmt.Fprintln(summary, summaryLine(rec, cfg.MetricPrefix))
			if cfg.TerminalTimelines {
				termline.Write(summary, rec, termline.Options{Width: termWidth(summary)})
			}
		},
		OnOpenStep:  func(rec *step.Record) { writeOpenStep(cfg, rec, log) },
		Resume:      resume,
		ResumeAfter: after,

		// Targets without credentials: those discovery finds get the top-level ones, those added
		// through the API only where the config allows it.
		DefaultAuth: cfg.Auth,
		APIAuth:     apiAuth(cfg, log),
	})
	if r.ln != nil {
		r.srv = &http.Server{
			Handler: api.New(api.Options{Collector: r.c, Token: cfg.APIToken.Reveal(), MetricsPublic: cfg.MetricsPublic, Metrics: self.Handler(), Report: report.Handler(cfg.OutDir, nil), Logger: log}),
			// Ending a step waits for a boundary scrape of every target: at most twice the scrape
			// timeout, so the write timeout leaves room for it.
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      2*cfg.Timeout() + 30*time.Second,
			IdleTimeout:       2 * time.Minute,
		}
	}
	r.disc = newDiscovery(cfg, r.c, log)
	r.closer = nil // from here on, run closes everything
	log.Info("scraping", "targets", len(cfg.Targets), "interval_s", cfg.Interval, "step_every", cfg.StepEvery, "out", cfg.OutDir)
	if len(cfg.Targets) == 0 && !cfg.HasDiscovery() {
		log.Info("no targets yet: waiting for them through the API (POST /v1/targets, or expose() in the Python client)", "url", "http://"+r.addr()+"/v1/targets")
	}
	return r, nil
}

// addr is the API's address, or "" without one.
func (r *running) addr() string {
	if r.ln == nil {
		return ""
	}
	return r.ln.Addr().String()
}

// run runs until ctx ends; the API keeps answering until the last step is closed.
func (r *running) run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	if r.srv != nil {
		r.log.Info("api listening", "url", "http://"+r.addr())
		go func() { serveErr <- r.srv.Serve(r.ln) }()
	}
	discDone := make(chan struct{})
	dctx, stopDisc := context.WithCancel(ctx)
	go func() {
		defer close(discDone)
		if r.disc != nil {
			r.disc.Run(dctx)
		}
	}()
	r.sinks.Start()
	err := r.c.Run(ctx)
	// The collector has written its last step: drain the sinks, within a bound so that a dead
	// tracker cannot hold the exit.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = errors.Join(err, r.sinks.Close(sctx))
	cancel()
	stopDisc()
	<-discDone
	if r.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.srv.Shutdown(sctx)
		if e := <-serveErr; e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("api server: %w", e))
		}
	}
	r.lock.Release() // after the last write to the out_dir
	return err
}

func trackerOptions(cfg config.Config) step.Options {
	// A run that draws, writes and prints no timelines need not keep their samples.
	noTimeline := !cfg.TimelinePlots && !cfg.RecordTimelines && !cfg.TerminalTimelines
	return step.Options{Prefix: cfg.MetricPrefix, PerWorker: cfg.PerWorker, Scalars: cfg.LogScalars, NoTimeline: noTimeline}
}

// runRecord is run with a recording: "vllmstat record FILE [run flags]".
func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "Usage: vllmstat record FILE [run flags]\n\nRuns \"vllmstat run --record FILE\"; see \"vllmstat run -h\" for the flags.")
			return exitOK
		}
		fmt.Fprintln(stderr, "vllmstat record: give the recording FILE first, then run's flags")
		return exitUsage
	}
	return runWith(ctx, "record", append([]string{"--record", args[0]}, args[1:]...), stdout, stderr)
}

// burst is how many targets are scraped together at most, about: a fleet of more is spread
// over the interval in bursts of this size (see scrape.Options.Burst).
const burst = 128

// lockedWriter serialises writes from several goroutines, so lines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// termWidth is the width of w when it is a terminal (through a lockedWriter too), else the
// default.
func termWidth(w io.Writer) int {
	if l, ok := w.(*lockedWriter); ok {
		w = l.w
	}
	if f, ok := w.(*os.File); ok {
		return termline.Width(f)
	}
	return termline.DefaultWidth
}
