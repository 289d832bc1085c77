// Package termline draws a step's timelines in a terminal: one line of block characters per
// worker and metric, scaled to the step's maximum of that metric, followed by the worker's
// active (busy) and idle seconds. It uses no colour, so the lines read the same in a log file.
package termline

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// DefaultMetrics are the series drawn when Options.Metrics is empty.
var DefaultMetrics = []string{vllm.Gauges[vllm.KVUsage].Name, vllm.Gauges[vllm.Running].Name}

// DefaultWidth is the line width used when the output is not a terminal.
const DefaultWidth = 100

// Options choose what Lines draws.
type Options struct {
	// Width is the width of every line in columns; 0 means DefaultWidth.
	Width int
	// Metrics are the timeline series to draw, by name without prefix; nil means DefaultMetrics.
	Metrics []string
}

// Blocks are the eight levels, lowest first; a zero is a blank and a time without any sample
// (after a worker's last scrape) is NoSample.
var Blocks = []rune("▁▂▃▄▅▆▇█")

// NoSample marks columns that no sample covers.
const NoSample = '·'

const (
	maxLabel = 24 // columns of the worker label at most, less on narrow lines
	minLabel = 8
	minBars  = 8
)

// Width returns f's width in columns when f is a terminal, else DefaultWidth.
func Width(f *os.File) int {
	fd := int(f.Fd())
	if term.IsTerminal(fd) {
		if w, _, err := term.GetSize(fd); err == nil && w > 0 {
			return w
		}
	}
	return DefaultWidth
}

// Write writes the Lines of r to w.
func Write(w io.Writer, r *step.Record, opt Options) error {
	_, err := io.WriteString(w, strings.Join(Lines(r, opt), "\n")+"\n")
	return err
}

// Lines draws r's timeline: for each metric, a header line and one line per worker. A record
// without a timeline gives a single line that says so. Workers without any engine gauge and
// without a sample of the metrics drawn are left out, with a last line that says why (see
// engineless).
func Lines(r *step.Record, opt Options) []string {
	if opt.Width <= 0 {
		opt.Width = DefaultWidth
	}
	if len(opt.Metrics) == 0 {
		opt.Metrics = DefaultMetrics
	}
	if r.Timeline == nil || len(r.Timeline.Workers) == 0 {
		return []string{fmt.Sprintf("step %d: no timeline", r.Step)}
	}
	var ws []step.WorkerTimeline
	for _, w := range r.Timeline.Workers {
		if !engineless(w, opt.Metrics) {
			ws = append(ws, w)
		}
	}
	left := len(r.Timeline.Workers) - len(ws)
	var note []string
	if left > 0 {
		note = append(note, fmt.Sprintf("%s left out: no engine gauges, only a server's counts (SGLang's tokenizer, with data parallelism)", workers(left)))
	}
	if len(ws) == 0 {
		return append([]string{fmt.Sprintf("step %d: no timeline of an engine", r.Step)}, note...)
	}
	// Labelled among every worker, as without the ones left out: the labels of the DP ranks
	// keep the server's port that their shared part would otherwise lose.
	ids := make([]step.WorkerID, 0, len(r.Timeline.Workers))
	for _, w := range r.Timeline.Workers {
		ids = append(ids, w.WorkerID)
	}
	all := timeline.Labels(ids, min(max(opt.Width/5, minLabel), maxLabel))
	labels := make([]string, 0, len(ws))
	for i, w := range r.Timeline.Workers {
		if !engineless(w, opt.Metrics) {
			labels = append(labels, all[i])
		}
	}
	labelW := 0
	for _, l := range labels {
		labelW = max(labelW, utf8.RuneCountInString(l))
	}
	stats := activity(ws)
	statsW := 0
	for _, s := range stats {
		statsW = max(statsW, utf8.RuneCountInString(s))
	}
	bars := max(opt.Width-labelW-statsW-4, minBars) // label, " │", bars, "│ ", stats

	var lines []string
	col := make([]float64, bars)
	for _, metric := range opt.Metrics {
		peak := 0.0
		for _, w := range ws {
			for _, p := range w.Series[metric] {
				if p.Value > peak && !math.IsInf(p.Value, 1) {
					peak = p.Value
				}
			}
		}
		lines = append(lines, fmt.Sprintf("step %d  %s  0–%.1fs  %c = %s", r.Step, metric, r.DurationS, Blocks[len(Blocks)-1], formatValue(peak)))
		for i, w := range ws {
			timeline.Resample(col, w.Series[metric], r.DurationS)
			var b strings.Builder
			b.WriteString(pad(labels[i], labelW))
			b.WriteString(" │")
			for _, v := range col {
				b.WriteRune(block(v, peak))
			}
			b.WriteString("│ ")
			b.WriteString(stats[i])
			lines = append(lines, strings.TrimRight(b.String(), " "))
		}
	}
	return append(append(lines, note...), undetermined(r)...)
}

// undetermined says, for each engine kind whose ledger has time in step.Undetermined, how much
// and why in that kind's words: its pages repeated old gauges then (SGLang's log point,
// TensorRT-LLM's last logged iteration), so its running requests drawn above may be those of
// the old gauges rather than the engine's.
func undetermined(r *step.Record) []string {
	suffix := "/" + step.StateKey(step.Undetermined)
	var keys []string
	for k, v := range r.Metrics {
		if strings.HasSuffix(k, suffix) && v > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		prefix := strings.TrimSuffix(k, suffix)
		line := fmt.Sprintf("%s: %.1f engine-s undetermined", prefix, r.Metrics[k])
		if f := r.Metrics[prefix+"/"+step.FractionKey(step.Undetermined)]; f > 0 {
			line += fmt.Sprintf(" (%.0f%%)", 100*f)
		}
		out = append(out, line+": "+staleGauges(prefix)+", generating or idle; their running requests may be stale")
	}
	return out
}

// engineless reports whether w is a worker of no engine, left out of the lines: it has
// samples, but of no gauge and of none of metrics. SGLang's tokenizer is one: on a server with
// data parallelism it exports the server's token and request counters and latencies, without a
// rank, apart from the DP ranks' schedulers, which have the gauges; its lines would be all
// NoSample.
func engineless(w step.WorkerTimeline, metrics []string) bool {
	if len(w.Series) == 0 {
		return false // no sample at all: its lines say so
	}
	for _, m := range metrics {
		if len(w.Series[m]) > 0 {
			return false
		}
	}
	for _, g := range vllm.Gauges {
		if len(w.Series[g.Name]) > 0 {
			return false
		}
	}
	return true
}

// workers is "1 worker" or "N workers".
func workers(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

// block is the character for v on a scale whose full block is peak.
func block(v, peak float64) rune {
	switch {
	case math.IsNaN(v):
		return NoSample
	case v <= 0 || peak <= 0:
		return ' '
	}
	level := int(math.Ceil(v / peak * float64(len(Blocks))))
	return Blocks[min(max(level, 1), len(Blocks))-1]
}

// activity is each worker's "active Xs idle Ys". When the tracker measured the worker's
// activity (step.Activity: busy when requests run or wait, failed scrapes not covered), those
// are its busy and idle seconds, as in the step record. Otherwise (a timeline made elsewhere)
// they are the time covered by samples with requests running, and by samples with none, where
// a sample stands for the interval since the previous one (the first since the step start).
// Columns are aligned across workers.
func activity(ws []step.WorkerTimeline) []string {
	active := make([]float64, len(ws))
	idle := make([]float64, len(ws))
	has := make([]bool, len(ws))
	for i, w := range ws {
		if a := w.Activity; a != nil {
			active[i], idle[i], has[i] = a.BusyS, a.IdleS, true
			continue
		}
		prev := 0.0
		for _, p := range w.Series[vllm.Gauges[vllm.Running].Name] {
			d := max(p.OffsetS-prev, 0)
			prev = max(prev, p.OffsetS)
			has[i] = true
			if p.Value > 0 {
				active[i] += d
			} else {
				idle[i] += d
			}
		}
	}
	aw, iw := 1, 1
	for i := range ws {
		aw = max(aw, len(fmt.Sprintf("%.1f", active[i])))
		iw = max(iw, len(fmt.Sprintf("%.1f", idle[i])))
	}
	out := make([]string, len(ws))
	for i := range ws {
		if !has[i] {
			out[i] = fmt.Sprintf("active %*s  idle %*s", aw+1, "-", iw+1, "-")
			continue
		}
		out[i] = fmt.Sprintf("active %*.1fs idle %*.1fs", aw, active[i], iw, idle[i])
	}
	return out
}

func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(w-utf8.RuneCountInString(s), 0))
}

// formatValue prints a scale's maximum with three significant digits.
func formatValue(v float64) string {
	return fmt.Sprintf("%.3g", v)
}

// staleGauges says what the pages of the engine kind whose keys are under prefix repeated in a
// span that is undetermined. The kind is that of prefix's last part; a prefix of one's own
// (see vllm.EnginePrefix) is read as SGLang's, the first kind whose pages had such spans.
func staleGauges(prefix string) string {
	if last := prefix[strings.LastIndexByte(prefix, '/')+1:]; last == vllm.Engines[vllm.TRTLLM].Prefix {
		return "the pages kept the gauges of the last iteration TensorRT-LLM logged"
	}
	return "the pages repeated an old log point of SGLang's scheduler"
}
