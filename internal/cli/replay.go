package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

const replayHelp = `Usage: vllmstat replay [flags] FILE

Reads a recording made by "vllmstat run --record FILE" (or any tool writing the format) and
prints its step records as JSON Lines on stdout, computed by the same code as run: for the
same scrapes, the lines equal run's steps.jsonl byte for byte.

FILE's later segments (FILE with .2, .3, … before its extension, written by later runs with
the same --record) are read after it, each as the separate run it was. Events must be in time
order within a segment: an event earlier than the one before it stops replay with exit 2 and
its line number.

Flags:
`

// maxWarnings is how many warnings of one kind replay prints before it only counts them.
const maxWarnings = 10

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vllmstat replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	perWorker := fs.Bool("per-worker", false, "add per-worker metrics to every step record")
	prefix := fs.String("metric-prefix", vllm.Prefix, "replaces the leading \"vllm\" of every metric key")
	scalars := fs.Bool("log-scalars", true, "add mean/max/p95 of the per-interval samples")
	maxLine := fs.Int("max-line-bytes", record.DefaultMaxLine, "longest line (decompressed) accepted; a longer one stops replay")
	workerLabels := fs.String("worker-labels", strings.Join(window.DefaultWorkerLabels(), ","), workerLabelsUsage)
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
	wl := labelList(*workerLabels)
	if err := window.CheckWorkerLabels(wl); err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: --worker-labels: %v\n", err)
		return exitUsage
	}
	segs, err := record.Segments(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
		return exitUsage
	}
	warn := newWarner(slog.New(slog.NewTextHandler(stderr, nil)))
	defer warn.summary()
	opt := step.Options{Prefix: *prefix, PerWorker: *perWorker, Scalars: *scalars}
	for _, seg := range segs {
		if code := replaySegment(ctx, seg, opt, wl, *maxLine, warn, stdout, stderr); code != exitOK {
			return code
		}
	}
	return exitOK
}

// replaySegment replays one segment, one run, with a tracker of its own, as that run had.
func replaySegment(ctx context.Context, path string, opt step.Options, workerLabels []string, maxLine int, warn *warner, stdout, stderr io.Writer) int {
	r, err := record.OpenContext(ctx, path, maxLine)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
		return exitUsage
	}
	defer r.Close()
	r.Warn = func(line int, msg string) {
		kind, _, _ := strings.Cut(msg, ` "`) // unknown kinds are one kind of warning
		warn.warn(kind, msg, "file", path, "line", line)
	}
	tr := step.NewTracker(opt)
	// Removals come in runs (a fleet leaving at once): the tracker forgets each run of them in
	// one pass, as the run did, before the next event of another kind.
	var gone []string
	for {
		e, err := r.Next()
		if len(gone) > 0 && (err != nil || e.Kind != record.KindRemove) {
			tr.Forget(gone...)
			gone = gone[:0]
		}
		if err == io.EOF {
			return exitOK
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "vllmstat replay: interrupted at %s line %d\n", path, r.Line())
			return exitError
		}
		if err != nil {
			fmt.Fprintf(stderr, "vllmstat replay: %s: %v\n", path, err)
			if errors.Is(err, record.ErrLineTooLong) {
				fmt.Fprintln(stderr, "vllmstat replay: raise --max-line-bytes if the recording is trusted")
			}
			return exitUsage
		}
		switch e.Kind {
		case record.KindScrape:
			var page *window.Page
			var serr error
			if e.Body != nil {
				page, serr = window.ParsePageOptions([]byte(*e.Body), window.Options{WorkerLabels: workerLabels})
				if serr != nil {
					warn.warn("not Prometheus text", "page is not Prometheus text; counted as a failed scrape", "target", e.Target, "ts", e.TS, "err", serr)
				}
			} else {
				serr = fmt.Errorf("%s", e.Error)
			}
			tr.Observe(e.TS, e.Target, page, serr)
		case record.KindRemove:
			gone = append(gone, e.Target)
		case record.KindTarget:
			tr.SetTargetLabels(e.Target, e.Labels)
		case record.KindStart:
			tr.Begin(e.TS)
		case record.KindPhase:
			if err := step.ValidPhase(e.Phase); err != nil {
				fmt.Fprintf(stderr, "vllmstat replay: %s: line %d: %v\n", path, r.Line(), err)
				return exitUsage
			}
			if e.Edge == record.EdgeStart {
				tr.StartPhase(e.Phase, e.TS)
			} else {
				tr.EndPhase(e.Phase, e.TS)
			}
		case record.KindGap:
			warn.warn("gap", "the recording lost events here (its disk refused writes); steps around it differ from the run's",
				"file", path, "line", r.Line(), "events", e.Events, "since", e.Since, "until", e.TS)
		case record.KindStep:
			rec := tr.EndStep(e.Step, e.TS)
			b, err := step.MarshalLine(&rec)
			if err != nil {
				fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
				return exitError
			}
			if _, err := stdout.Write(b); err != nil {
				fmt.Fprintf(stderr, "vllmstat replay: write: %v\n", err)
				return exitError
			}
		}
	}
}

// warner logs the first maxWarnings warnings of each kind and counts the rest, so that a file
// of millions of bad lines gives a screenful, not gigabytes.
type warner struct {
	log    *slog.Logger
	counts map[string]int
}

func newWarner(log *slog.Logger) *warner { return &warner{log: log, counts: map[string]int{}} }

func (w *warner) warn(kind, msg string, args ...any) {
	w.counts[kind]++
	if n := w.counts[kind]; n <= maxWarnings {
		w.log.Warn(msg, args...)
		if n == maxWarnings {
			w.log.Warn("further warnings like this one are counted, not shown", "warning", msg)
		}
	}
}

// summary logs how many warnings were not shown.
func (w *warner) summary() {
	for _, kind := range slices.Sorted(maps.Keys(w.counts)) {
		if n := w.counts[kind]; n > maxWarnings {
			w.log.Warn("warnings not shown", "warning", kind, "count", n-maxWarnings)
		}
	}
}
