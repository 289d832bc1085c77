package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/run"
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
	defer run.SetGC(log)()
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

// collect runs the pipeline of cfg until ctx ends, printing each step's summary line (and
// its timelines, if asked) to summary.
func collect(ctx context.Context, cfg config.Config, log *slog.Logger, summary io.Writer) error {
	p := run.New(cfg, run.Options{Logger: log, OnStep: func(rec *step.Record) {
		fmt.Fprintln(summary, summaryLine(rec, cfg.MetricPrefix))
		if cfg.TerminalTimelines {
			termline.Write(summary, rec, termline.Options{Width: termWidth(summary)})
		}
	}})
	return p.Run(ctx)
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
