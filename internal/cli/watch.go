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
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/run"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

const watchHelp = `Usage: vllmstat watch [flags] TARGET...

Scrapes the targets (/metrics URLs or host:port) every --interval and prints one row per
interval, like vmstat: workers up/total, running and waiting requests (summed over workers), KV
usage mean and max, the prefix-cache hit rate over the interval, preemptions in the interval,
generation and prompt tokens/s. A target that goes down is logged on stderr with the reason
(refused, timeout, http_status, parse, ...), and again when it is back up. Ctrl-C prints the
whole session's totals (the metric keys of one step record covering the session, one per
line, then the stragglers and worst workers it names, if any) and exits 0.

On a terminal the header repeats every screenful and --per-worker redraws one row per worker in
place; on a pipe only plain lines are printed.

Flags:
`

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return watchWith(ctx, args, stdout, stderr, clock.Real{})
}

// watchWith runs watch until ctx ends, on clk's time: its ticker paces the rounds and its
// time stamps them.
func watchWith(ctx context.Context, args []string, stdout, stderr io.Writer, clk clock.Clock) int {
	fs := flag.NewFlagSet("vllmstat watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	interval := fs.Float64("interval", 1, "seconds between scrapes")
	perWorker := fs.Bool("per-worker", false, "one row per worker (redrawn in place on a terminal)")
	timeout := fs.Float64("timeout", 0, "scrape timeout in seconds (default 80% of the interval, at most 10)")
	prefix := fs.String("metric-prefix", vllm.Prefix, "prefix of the metric keys in the session summary")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), watchHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	cfg := config.Default()
	cfg.Targets = config.TargetsOf(fs.Args())
	cfg.Interval = *interval
	cfg.MetricPrefix = *prefix
	cfg.SetPath("targets", "arguments")
	cfg.SetPath(config.KeyInterval, "--interval")
	// 0 is the default; a negative timeout is Validate's problem, told with the others. The
	// seconds are clamped to what a time.Duration holds, which would wrap around.
	if *timeout != 0 {
		secs := math.Max(-maxSeconds, math.Min(*timeout, maxSeconds))
		cfg.ScrapeTimeout = time.Duration(secs * float64(time.Second))
		cfg.SetPath("scrape_timeout", "--timeout")
	}
	cfg.Listen = ""
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "vllmstat watch: %v\n", err)
		return exitUsage
	}
	w := newWatcher(cfg, *perWorker, stdout, clk, slog.New(slog.NewTextHandler(stderr, nil)))
	p := run.NewWatch(cfg, run.WatchOptions{Clock: clk, Observer: w, OnInterval: w.interval, OnSession: w.summary})
	if err := p.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "vllmstat watch: %v\n", err)
		return exitError
	}
	<-ctx.Done()
	if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(stderr, "vllmstat watch: %v\n", err)
		return exitError
	}
	return exitOK
}

// watcher prints a watch session from what the collector observes, on the collector's
// goroutine: a row (or a row per worker) for each round of scrapes, a tick's, once every
// target has answered it or was skipped, and the session's summary at exit.
type watcher struct {
	prefix    string
	perWorker bool
	out       io.Writer
	tty       bool
	height    int
	clock     clock.Clock
	log       *slog.Logger

	targets []string               // in the order given, the order of a round's log lines
	round   map[string]roundResult // the targets heard from in this round
	fresh   []step.Interval        // the intervals of the scrape being observed
	ivs     []step.Interval        // this round's intervals
	known   map[step.WorkerID]bool
	lines   int // rows since the last header
	drawn   int // rows drawn in place last round

	down   map[string]string // target -> reason of its last failed scrape; absent when up
	hints  map[string]string // target -> the setup hint last told; absent when none
	failed map[string]int    // failed scrapes of the session by reason
}

// roundResult is how a target's scrape of a round went: skipped, or failed for reason (""
// when it succeeded).
type roundResult struct {
	skipped bool
	reason  string
	err     error
	hint    string // page.Hint of the answer
}

func newWatcher(cfg config.Config, perWorker bool, out io.Writer, clk clock.Clock, log *slog.Logger) *watcher {
	w := &watcher{prefix: cfg.MetricPrefix, perWorker: perWorker, out: out, height: 24, clock: clk, log: log,
		round: map[string]roundResult{}, known: map[step.WorkerID]bool{}, down: map[string]string{}, hints: map[string]string{}, failed: map[string]int{}}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		w.tty = true
		if _, h, err := term.GetSize(int(f.Fd())); err == nil && h > 4 {
			w.height = h
		}
	}
	return w
}

// interval keeps a worker's values of the scrape being observed, which Scraped then puts in
// its round.
func (w *watcher) interval(iv step.Interval) { w.fresh = append(w.fresh, iv.Clone()) }

// Scraped puts a scrape in the round, and prints the round once every target is in it. A target
// heard from again before the others ends the round without them: they are late, and their
// answers count in the next one.
func (w *watcher) Scraped(res *scrape.Result) {
	if _, ok := w.round[res.Target]; ok {
		w.endRound()
	}
	w.ivs = append(w.ivs, w.fresh...)
	w.fresh = w.fresh[:0]
	// The setup hint of the answer, as the collector logs it for run (page.Hint): a 404 is
	// most often a wrong port or path, which "HTTP status 404" alone does not say.
	var se *scrape.StatusError
	hint := page.Hint(res.Page, errors.As(res.Err(), &se) && se.Code == http.StatusNotFound, res.Declared)
	w.round[res.Target] = roundResult{reason: res.Reason(), err: res.Err(), hint: hint}
	if res.Err() != nil {
		w.failed[res.Reason()]++
	}
	w.maybeEndRound()
}

// Skipped puts a target whose previous scrape still runs in the round, with nothing to show.
func (w *watcher) Skipped(target string) {
	if _, ok := w.round[target]; !ok {
		w.round[target] = roundResult{skipped: true}
		w.maybeEndRound()
	}
}

// TargetsChanged keeps the targets: the collector tells the first ones before any scrape.
func (w *watcher) TargetsChanged(added, removed []string) {
	w.targets = slices.DeleteFunc(w.targets, func(u string) bool { return slices.Contains(removed, u) })
	w.targets = append(w.targets, added...)
}

// StepClosed is never called: no step of a watch session ends.
func (w *watcher) StepClosed(*step.Record) {}

func (w *watcher) maybeEndRound() {
	if len(w.round) >= len(w.targets) {
		w.endRound()
	}
}

// endRound logs the round's transitions, in the targets' order, and prints its row(s).
func (w *watcher) endRound() {
	now := w.clock.Now()
	down := 0
	for _, u := range w.targets {
		r, ok := w.round[u]
		if !ok || r.skipped {
			continue
		}
		if r.err != nil {
			down++
		}
		w.logTransition(u, r)
		w.logHint(u, r.hint)
	}
	clear(w.round)
	for _, iv := range w.ivs {
		w.known[iv.WorkerID] = true
	}
	if w.perWorker {
		w.printWorkers(now, down)
	} else {
		w.printRow(now, w.ivs, fmt.Sprintf("%d/%d", len(w.ivs), max(len(w.known), len(w.ivs))), down)
	}
	w.ivs = w.ivs[:0]
}

// logTransition logs a target going down (with the reason) or coming back, once per change.
func (w *watcher) logTransition(target string, r roundResult) {
	reason, was := r.reason, w.down[target]
	switch {
	case reason == was:
		return
	case reason != "":
		w.down[target] = reason
		w.log.Warn("target down", "target", target, "reason", reason, "err", r.err)
	default:
		delete(w.down, target)
		w.log.Info("target up", "target", target)
	}
	if w.tty {
		w.drawn = 0 // the message went between drawings: draw the next one below it
	}
}

// logHint logs a target's setup hint when it appears or changes, worded as run's log words it.
func (w *watcher) logHint(target, hint string) {
	if hint == w.hints[target] {
		return
	}
	if hint == "" {
		delete(w.hints, target)
		return
	}
	w.hints[target] = hint
	if hint == page.HintNotFound {
		w.log.Warn("no metrics page at "+target+": "+hint, "target", target)
	} else {
		w.log.Warn("target "+hint, "target", target)
	}
	if w.tty {
		w.drawn = 0
	}
}

var watchCols = []struct{ head, format string }{
	{"time", "%8s"}, {"workers", "%7s"}, {"down", "%4s"}, {"run", "%6s"}, {"wait", "%6s"},
	{"kv_mean", "%7s"}, {"kv_max", "%6s"}, {"hit%", "%6s"}, {"preempt", "%7s"}, {"gen_tok/s", "%9s"}, {"prompt_tok/s", "%12s"},
}

func (w *watcher) header(first string) string {
	var b strings.Builder
	for i, c := range watchCols {
		h := c.head
		if i == 1 && first != "" {
			h = first
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, c.format, h)
	}
	return b.String()
}

// rowFields summarises intervals (of all workers, or one) into the row's columns. A worker
// without the engines' gauges (SGLang's tokenizer on a server with data parallelism, which
// counts the server's tokens) shows "-" for them, not 0; the hit rate is each worker's engine
// kind's (vllm.EngineSpec.HitRate), hits over queries in tokens either way.
func rowFields(ivs []step.Interval) []string {
	var run, wait, q, h, pre, gen, prompt, kvSum, kvMax float64
	var kvN int
	var hasRun, hasWait, hasQ, hasPre, hasGen, hasPrompt bool
	kvMax = math.Inf(-1)
	for _, iv := range ivs {
		if x, ok := iv.Value(vllm.Gauges[vllm.Running].Name); ok {
			run += x
			hasRun = true
		}
		if x, ok := iv.Value(vllm.Gauges[vllm.Waiting].Name); ok {
			wait += x
			hasWait = true
		}
		if kv, ok := iv.Value(vllm.Gauges[vllm.KVUsage].Name); ok {
			kvSum += kv
			kvN++
			kvMax = math.Max(kvMax, kv)
		}
		if hr := vllm.Engines[iv.Kind].HitRate; hr != nil {
			if x, ok := iv.Value(vllm.Counters[hr.Den].Name); ok {
				q += x
				hasQ = true
				// An interval without its hits (SGLang's cached tokens are no timeline
				// series) has them as its hit rate times its queries.
				if hits, ok := iv.Value(vllm.Counters[hr.Num].Name); ok {
					h += hits
				} else if r, ok := iv.Value(hr.Name); ok {
					h += r * x
				}
			}
		}
		if x, ok := iv.Value(keyPreemptions.Name); ok {
			pre += x
			hasPre = true
		}
		if x, ok := iv.Value(keyGenPerS.Name); ok {
			gen += x
			hasGen = true
		}
		if x, ok := iv.Value(keyPromptPerS.Name); ok {
			prompt += x
			hasPrompt = true
		}
	}
	f := func(ok bool, format string, v float64) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	return []string{
		f(hasRun, "%.0f", run), f(hasWait, "%.0f", wait),
		f(kvN > 0, "%.2f", kvSum/float64(max(kvN, 1))), f(kvN > 0, "%.2f", kvMax),
		f(hasQ && q > 0, "%.1f", 100*h/math.Max(q, 1)), f(hasPre, "%.0f", pre),
		f(hasGen, "%.0f", gen), f(hasPrompt, "%.0f", prompt),
	}
}

func (w *watcher) formatRow(t time.Time, who string, down int, fields []string) string {
	vals := append([]string{t.Local().Format("15:04:05"), who, fmt.Sprint(down)}, fields...)
	var b strings.Builder
	for i, c := range watchCols {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, c.format, vals[i])
	}
	return b.String()
}

func (w *watcher) printRow(t time.Time, ivs []step.Interval, who string, down int) {
	if w.lines == 0 || w.tty && w.lines >= w.height-1 {
		fmt.Fprintln(w.out, w.header(""))
		w.lines = 0
	}
	fmt.Fprintln(w.out, w.formatRow(t, who, down, rowFields(ivs)))
	w.lines++
}

// printWorkers prints one row per worker: redrawn in place on a terminal, appended on a pipe.
func (w *watcher) printWorkers(t time.Time, down int) {
	ivs := append([]step.Interval(nil), w.ivs...)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].WorkerID.Compare(ivs[j].WorkerID) < 0 })
	var rows []string
	rows = append(rows, w.header("worker"))
	for i, iv := range ivs {
		rows = append(rows, w.formatRow(t, fmt.Sprint(i), down, rowFields(ivs[i:i+1])))
		_ = iv
	}
	rows = append(rows, w.formatRow(t, "all", down, rowFields(ivs)))
	if w.tty {
		if w.drawn > 0 {
			fmt.Fprintf(w.out, "\x1b[%dA", w.drawn) // back to the top of the previous drawing
		}
		for _, r := range rows {
			fmt.Fprint(w.out, "\r\x1b[2K"+r+"\n")
		}
		w.drawn = len(rows)
		return
	}
	for _, r := range rows[1:] {
		if w.lines == 0 {
			fmt.Fprintln(w.out, rows[0])
		}
		fmt.Fprintln(w.out, r)
		w.lines++
	}
}

// summary prints the whole session, rec, as one step record has it.
func (w *watcher) summary(rec *step.Record) {
	printSession(w.out, rec, w.prefix, w.failedByReason())
}

// printSession prints a session's record: its duration, workers and scrapes (failed, the
// failed ones by reason), every metric key and its value, then the stragglers and worst
// workers it names. A record with phases then has, per phase, a line of its time (the rollout's
// with its figures, as the summary line has them) and its keys as trackers log them.
func printSession(out io.Writer, rec *step.Record, prefix, failed string) {
	fmt.Fprintf(out, "\nsession: %.1fs, %d workers, %d scrapes ok, %d failed%s\n", rec.DurationS, rec.Workers, rec.Scrapes.OK, rec.Scrapes.Failed, failed)
	width := 0
	for k := range rec.Scalars(prefix) {
		width = max(width, len(k))
	}
	printKeys := func(metrics map[string]float64, key func(string) string) {
		for _, k := range slices.Sorted(maps.Keys(metrics)) {
			fmt.Fprintf(out, "  %-*s  %s\n", width, key(k), formatValue(metrics[k]))
		}
	}
	printKeys(rec.Metrics, func(k string) string { return k })
	for _, l := range balanceLines(rec) {
		fmt.Fprintln(out, "  "+l)
	}
	for _, name := range phaseNames(rec) {
		p := rec.Phases[name]
		head := fmt.Sprintf("%s %.1fs", name, p.DurationS)
		if name == rolloutPhase {
			head = rolloutPart(rec, prefix)
		}
		fmt.Fprintf(out, "  %s (open %s)\n", head, times(p.Intervals))
		printKeys(p.Metrics, func(k string) string { return step.PhaseKey(prefix, name, k) })
	}
}

// failedByReason is " (refused 3, timeout 1)", or "" when no scrape failed.
func (w *watcher) failedByReason() string {
	if len(w.failed) == 0 {
		return ""
	}
	reasons := make([]string, 0, len(w.failed))
	for r, n := range w.failed {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(reasons)
	return " (" + strings.Join(reasons, ", ") + ")"
}

func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
