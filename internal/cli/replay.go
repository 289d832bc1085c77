package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/window"
)

const replayHelp = `Usage: vllmstat replay [flags] FILE

Reads a recording made by "vllmstat run --record FILE" (or any tool writing the format) and
prints its step records as JSON Lines on stdout, computed by the same code as run: for the
same scrapes, the lines equal run's steps.jsonl byte for byte.

Flags:
`

func runReplay(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vllmstat replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	perWorker := fs.Bool("per-worker", false, "add per-worker metrics to every step record")
	prefix := fs.String("metric-prefix", "vllm", "replaces the leading \"vllm\" of every metric key")
	scalars := fs.Bool("log-scalars", true, "add mean/max/p95 of the per-interval samples")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "vllmstat replay: give exactly one recording file")
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	r, err := record.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
		return exitUsage
	}
	defer r.Close()
	r.Warn = func(line int, msg string) { log.Warn(msg, "file", fs.Arg(0), "line", line) }
	tr := step.NewTracker(step.Options{Prefix: *prefix, PerWorker: *perWorker, Scalars: *scalars})
	for {
		e, err := r.Next()
		if err == io.EOF {
			return exitOK
		}
		if err != nil {
			fmt.Fprintf(stderr, "vllmstat replay: %s: %v\n", fs.Arg(0), err)
			return exitUsage
		}
		switch e.Kind {
		case record.KindScrape:
			var page *window.Page
			var serr error
			if e.Body != nil {
				page, serr = window.ParsePage([]byte(*e.Body))
				if serr != nil {
					log.Warn("page is not Prometheus text; counted as a failed scrape", "target", e.Target, "ts", e.TS, "err", serr)
				}
			} else {
				serr = fmt.Errorf("%s", e.Error)
			}
			tr.Observe(e.TS, e.Target, page, serr)
		case record.KindStep:
			rec := tr.EndStep(e.Step, e.TS)
			b, err := step.MarshalLine(&rec)
			if err != nil {
				fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
				return exitError
			}
			if _, err := stdout.Write(b); err != nil {
				return exitError
			}
		}
	}
}
