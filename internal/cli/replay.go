package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

const replayHelp = `Usage: vllmstat replay [flags] FILE

Reads a recording made by "vllmstat run --record FILE" (or any tool writing the format) and
prints its step records as JSON Lines on stdout, computed by the same code as run: for the
same scrapes, the lines equal run's steps.jsonl byte for byte.

FILE's later segments (FILE with .2, .3, … before its extension, written by later runs with
the same --record) are read after it, each as the separate run it was; a later run resumed
from step N (--resume-from) cut the steps after N out of steps.jsonl, and replay leaves the
earlier segments' steps after N out too. Events must be in time
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
	workerLabels := fs.String("worker-labels", strings.Join(page.DefaultWorkerLabels(), ","), workerLabelsUsage)
	gpu := fs.String("gpu", "", gpuUsage)
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
	if err := page.CheckWorkerLabels(wl); err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: --worker-labels: %v\n", err)
		return exitUsage
	}
	segs, err := record.Segments(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
		return exitUsage
	}
	var peak vllm.Peak
	if *gpu != "" {
		if peak, err = vllm.GPUPeak(*gpu); err != nil {
			fmt.Fprintf(stderr, "vllmstat replay: --gpu: %v\n", err)
			return exitUsage
		}
	}
	opt := step.Options{Prefix: *prefix, PerWorker: *perWorker, Scalars: *scalars, Peak: peak}
	return replayAll(ctx, segs, opt, wl, *maxLine, stdout, stderr)
}

// replayAll replays the segments of a recording, in order, writing the step lines to stdout,
// with progress on stderr when it is a terminal.
func replayAll(ctx context.Context, segs []string, opt step.Options, workerLabels []string, maxLine int, stdout, stderr io.Writer) int {
	warn := newWarner(slog.New(slog.NewTextHandler(stderr, nil)))
	defer warn.summary()
	var total int64
	for _, seg := range segs {
		if st, err := os.Stat(seg); err == nil {
			total += st.Size()
		}
	}
	// A run resumed from step k cut the steps after k out of steps.jsonl before it went on, so
	// a segment's steps after the smallest k of the segments after it are not in steps.jsonl.
	// The first segment's own start is not read here: nothing before it depends on it, and it
	// may be a pipe, which can be read only once.
	last := make([]int64, len(segs))
	upTo := int64(math.MaxInt64)
	for i := len(segs) - 1; i >= 1; i-- {
		last[i] = upTo
		k, resumed, err := record.ResumedFrom(ctx, segs[i], maxLine)
		if err != nil {
			fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
			return exitUsage
		}
		if resumed {
			upTo = min(upTo, k)
		}
	}
	last[0] = upTo
	prog := newProgress(stderr, "replay", total)
	defer prog.done()
	var base int64
	for i, seg := range segs {
		n, code := replaySegment(ctx, seg, last[i], opt, workerLabels, maxLine, warn, prog, base, stdout, stderr)
		if code != exitOK {
			return code
		}
		base += n
	}
	return exitOK
}

// replaySegment replays one segment, one run, with a tracker of its own, as that run had, and
// returns how many of its bytes it read. Steps after last are replayed but not written (a later
// run resumed from an earlier step cut them). base is the bytes of the segments before it, for
// prog.
func replaySegment(ctx context.Context, path string, last int64, opt step.Options, workerLabels []string, maxLine int, warn *warner, prog *progress, base int64, stdout, stderr io.Writer) (int64, int) {
	r, err := record.OpenContext(ctx, path, maxLine)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat replay: %v\n", err)
		return 0, exitUsage
	}
	defer r.Close()
	n, code := replayEvents(ctx, r, path, last, opt, workerLabels, warn, prog, base, stdout, stderr)
	return n, code
}

// replayEvents feeds the events of r to a new tracker and writes the line of each step up to
// last to stdout.
func replayEvents(ctx context.Context, r *record.Reader, path string, last int64, opt step.Options, workerLabels []string, warn *warner, prog *progress, base int64, stdout, stderr io.Writer) (int64, int) {
	r.Warn = func(line int, msg string) {
		kind, _, _ := strings.Cut(msg, ` "`) // unknown kinds are one kind of warning
		warn.warn(kind, msg, "file", path, "line", line)
	}
	var outErr error // a step line not written: the output's failure, not the recording's
	err := record.Replay(r, step.NewTracker(opt), record.ReplayOptions{
		WorkerLabels: workerLabels,
		OnEvent: func(e *record.Event) {
			prog.update(base + r.Offset())
			if e.Kind == record.KindGap {
				warn.warn("gap", "the recording lost events here (its disk refused writes); steps around it differ from the run's",
					"file", path, "line", r.Line(), "events", e.Events, "since", e.Since, "until", e.TS)
			}
		},
		OnBadPage: func(e *record.Event, err error) {
			warn.warn("not Prometheus text", "page is not Prometheus text; counted as a failed scrape", "target", e.Target, "ts", e.TS, "err", err)
		},
		OnStep: func(rec *step.Record) error {
			if rec.Step > last {
				return nil
			}
			b, err := step.MarshalLine(rec)
			if err != nil {
				outErr = err
				return err
			}
			if _, err := stdout.Write(b); err != nil {
				outErr = fmt.Errorf("write: %w", err)
				return outErr
			}
			return nil
		},
	})
	switch {
	case err == nil:
		return r.Offset(), exitOK
	case outErr != nil:
		fmt.Fprintf(stderr, "vllmstat replay: %v\n", outErr)
		return r.Offset(), exitError
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		prog.done()
		fmt.Fprintf(stderr, "vllmstat replay: interrupted at %s line %d (%s)\n", path, r.Line(), prog.status(base+r.Offset(), prog.now()))
		return r.Offset(), exitError
	default:
		fmt.Fprintf(stderr, "vllmstat replay: %s: %v\n", path, err)
		if errors.Is(err, record.ErrLineTooLong) {
			fmt.Fprintln(stderr, "vllmstat replay: raise --max-line-bytes if the recording is trusted")
		}
		return r.Offset(), exitUsage
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
