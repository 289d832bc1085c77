// Package report builds the run report: one self-contained HTML page with a headline of the run
// (steps, workers, hit rate, preemptions, throughput, generating and stale-token shares, TTFT,
// straggler tail), the step metrics charted across steps in the spec's groups under the spec's
// titles and units (a phase's values beside the whole step's; keys that are 0 in every step
// named in one line instead; the engine time ledger stacked by state), each step's phases and
// per-worker timelines (a worker in one colour throughout) and a table of all steps, its
// columns grouped as the charts. The page needs no network: its data, script and style are
// inlined. vllmstat report writes it to a file; Handler serves it live, built by the same code.
package report

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// Options configure a report.
type Options struct {
	// Title heads the page; "" means the run folder's name.
	Title string
	// Refresh reloads the page every so many seconds; 0 never.
	Refresh int
	// TimelineSteps is how many of the latest steps carry their timelines in the page; 0
	// means 300. Older steps say where their timeline file is.
	TimelineSteps int
	// WorkerBytes bounds the per-worker timeline data in the page; the latest steps get it
	// until it runs out, older ones keep the fleet's band (min, max, mean, p95). 0 means 16 MiB.
	WorkerBytes int
	// Clock tells the time the page says it was generated; nil is the wall clock.
	Clock clock.Clock
}

func (o Options) withDefaults() Options {
	if o.TimelineSteps <= 0 {
		o.TimelineSteps = 300
	}
	if o.WorkerBytes <= 0 {
		o.WorkerBytes = 16 << 20
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

// cols is the width of the embedded timeline grid: a step's samples are resampled to this many
// columns, each drawn as a step.
const cols = 60

// noValue marks a grid cell without a sample in the quantised timelines.
const noValue = 255

// ReadSteps reads a steps.jsonl file. A last line cut short (a run still writing) is ignored.
func ReadSteps(path string) ([]*step.Record, error) {
	recs, _, err := readSteps(path)
	return recs, err
}

// readSteps reads a steps.jsonl file with each record's fleet balance (nil for a record
// without stragglers or worst workers).
func readSteps(path string) ([]*step.Record, []*stepBalance, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var out []*step.Record
	var bals []*stepBalance
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r step.Record
		if err := json.Unmarshal(b, &r); err != nil {
			if !bytes.HasSuffix(b, []byte("}")) {
				break // a partial last line
			}
			return nil, nil, fmt.Errorf("read %q line %d: %w", path, line, err)
		}
		bal, err := readBalance(b)
		if err != nil {
			return nil, nil, fmt.Errorf("read %q line %d: stragglers or worst workers: %w", path, line, err)
		}
		out = append(out, &r)
		bals = append(bals, bal)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read %q: %w", path, err)
	}
	return out, bals, nil
}

// timelineSource gives the timeline file of a step.
type timelineSource interface {
	steps() ([]int64, error)
	digest(n int64) (*stepTimeline, error)
}

// dirSource reads the timeline files of a run folder, keeping their digests between builds.
type dirSource struct {
	outDir string
	cache  map[string]cached
}

type cached struct {
	size int64
	mod  time.Time
	d    *stepTimeline
}

func newDirSource(outDir string) *dirSource {
	return &dirSource{outDir: outDir, cache: map[string]cached{}}
}

func (s *dirSource) steps() ([]int64, error) { return timeline.Steps(s.outDir) }

func (s *dirSource) digest(n int64) (*stepTimeline, error) {
	path := timeline.Path(s.outDir, n)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if c, ok := s.cache[path]; ok && c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
		return c.d, nil
	}
	f, err := timeline.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	d := digest(f)
	s.cache[path] = cached{size: fi.Size(), mod: fi.ModTime(), d: d}
	return d, nil
}

// stepTimeline is one step's timelines as the page carries them: per series, the fleet's band
// and each worker's values on a grid of Cols columns, quantised to bytes (0..254 of Max, 255
// for no sample) and base64-encoded.
type stepTimeline struct {
	DurS    float64  `json:"dur"`
	Cols    int      `json:"cols"`
	Workers []string `json:"workers"`
	// Colors are the workers' colour indexes, the same for a worker in every step (see
	// colorWorkers).
	Colors []int                    `json:"colors"`
	Series map[string]*seriesDigest `json:"series"`
	start  time.Time                // the step's start, as the file gives it
	ids    []step.WorkerID          // the workers, in the order of Workers
	rows   map[string]string        // per-worker data, added to Series when the budget allows
	order  []string                 // series names in a fixed order
}

type seriesDigest struct {
	Max  float64 `json:"max"`
	Band string  `json:"band"`        // min, max, mean, p95 rows
	Rows string  `json:"w,omitempty"` // workers × cols
}

// digest reduces a timeline file to what the page shows.
func digest(f *timeline.File) *stepTimeline {
	dur := f.DurationS()
	ids := make([]step.WorkerID, len(f.Workers))
	names := map[string]bool{}
	for i, w := range f.Workers {
		ids[i] = w.ID()
		for name, ps := range w.Series {
			if len(ps) > 0 {
				names[name] = true
			}
		}
	}
	n := cols
	d := &stepTimeline{DurS: dur, Cols: n, Workers: timeline.Labels(ids, 40), Series: map[string]*seriesDigest{}, start: f.Start, ids: ids, rows: map[string]string{}}
	for name := range names {
		d.order = append(d.order, name)
	}
	slices.Sort(d.order)
	series := make([][]step.Point, len(f.Workers))
	buf := make([]byte, 0, len(f.Workers)*n)
	for _, name := range d.order {
		for i, w := range f.Workers {
			series[i] = w.Series[name]
		}
		grid := timeline.Grid(series, dur, n)
		band := timeline.Spread(grid)
		peak := 0.0
		for _, v := range band.Max {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				peak = max(peak, v)
			}
		}
		sd := &seriesDigest{Max: round(peak)}
		buf = buf[:0]
		for _, row := range [][]float64{band.Min, band.Max, band.Mean, band.P95} {
			buf = quantise(buf, row, peak)
		}
		sd.Band = base64.StdEncoding.EncodeToString(buf)
		buf = buf[:0]
		for _, row := range grid {
			buf = quantise(buf, row, peak)
		}
		d.rows[name] = base64.StdEncoding.EncodeToString(buf)
		d.Series[name] = sd
	}
	return d
}

func quantise(b []byte, row []float64, peak float64) []byte {
	for _, v := range row {
		switch {
		case math.IsNaN(v):
			b = append(b, noValue)
		case peak <= 0 || v <= 0:
			b = append(b, 0)
		default:
			b = append(b, byte(math.Round(min(v/peak, 1)*254)))
		}
	}
	return b
}

// round keeps six significant digits, enough for a chart and a table, to keep the page small.
func round(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}

// values is a column of numbers where NaN is written as null.
type values []float64

func (vs values) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8*len(vs)+2)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, round(v), 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// pageData is everything the page's script draws, embedded as JSON.
type pageData struct {
	Title     string   `json:"title"`
	Generated string   `json:"generated"`
	Refresh   int      `json:"refresh"`
	Steps     []int64  `json:"steps"`
	Start     []string `json:"start"`
	Dur       values   `json:"dur"`
	Workers   []int    `json:"workers"`
	OK        []int    `json:"ok"`
	Failed    []int    `json:"failed"`
	Keys      []string `json:"keys"`
	Values    []values `json:"values"` // per key, per step
	// Headline is the run at a glance, above the charts.
	Headline []tile `json:"headline"`
	// Groups are the charts, by group; Zero the keys that are 0 in every step, by chart, which
	// the page names in one line instead of charting them.
	Groups []group `json:"groups"`
	Zero   []chart `json:"zero"`
	// Series labels the timelines' series, in the order the page shows them.
	Series    []seriesInfo             `json:"series"`
	Timelines map[string]*stepTimeline `json:"timelines"` // by step number
	// TimelineFiles counts the timeline files of the steps in steps.jsonl; Timelines may hold
	// fewer.
	TimelineFiles int `json:"timelineFiles"`
	// Notes explain what the page leaves out.
	Notes []string `json:"notes"`
	// Balance names each step's stragglers and worst workers, by step number; steps whose
	// records name none are absent.
	Balance map[string]*stepBalance `json:"balance"`
	// Phases are the phases of the steps, the rollout first, then by name (see addPhases).
	// These four fields are absent when no step has a phase.
	Phases []pagePhase `json:"phases,omitempty"`
	// KeyPhase is each key's phase, "" for the whole step's keys.
	KeyPhase []string `json:"keyPhase,omitempty"`
	// KeyOf is, for each key, the whole step's key that it is the value of (itself for the
	// whole step's keys): its chart and its name in the step view.
	KeyOf []string `json:"keyOf,omitempty"`
	// PhaseFigures are the keys that the step view shows for each phase.
	PhaseFigures []figure `json:"phaseFigures,omitempty"`
}

// build assembles the page data from the step records and their timelines.
// bals, when not nil, holds each record's fleet balance.
func build(title string, recs []*step.Record, bals []*stepBalance, src timelineSource, opt Options, now time.Time) (*pageData, error) {
	d := &pageData{Title: title, Generated: now.UTC().Format(time.RFC3339), Refresh: opt.Refresh, Timelines: map[string]*stepTimeline{}, Notes: []string{}, Groups: []group{}, Keys: []string{}, Values: []values{}, Balance: map[string]*stepBalance{}}
	keySet := map[string]bool{}
	for _, r := range recs {
		for k := range r.Metrics {
			keySet[k] = true
		}
	}
	for k := range keySet {
		d.Keys = append(d.Keys, k)
	}
	d.Steps, d.Start, d.Dur, d.Workers, d.OK, d.Failed = []int64{}, []string{}, values{}, []int{}, []int{}, []int{}
	slices.Sort(d.Keys)
	addPhases(d, recs)
	d.Values = make([]values, len(d.Keys))
	for i := range d.Values {
		d.Values[i] = make(values, len(recs))
	}
	for j, r := range recs {
		d.Steps = append(d.Steps, r.Step)
		d.Start = append(d.Start, r.Start.UTC().Format(time.RFC3339))
		d.Dur = append(d.Dur, r.DurationS)
		d.Workers = append(d.Workers, r.Workers)
		d.OK = append(d.OK, r.Scrapes.OK)
		d.Failed = append(d.Failed, r.Scrapes.Failed)
		for i := range d.Keys {
			v, ok := d.value(r, i)
			if !ok {
				v = math.NaN()
			}
			d.Values[i][j] = v
		}
	}
	// A phase's key shares the chart of the whole step's key that it is the phase's value of.
	of := d.Keys
	if d.KeyOf != nil {
		of = d.KeyOf
	}
	whole := make([]int, len(d.Keys)) // for each key, the whole step's key it is the value of
	index := make(map[string]int, len(d.Keys))
	for i, k := range d.Keys {
		if d.KeyPhase == nil || d.KeyPhase[i] == "" {
			index[k] = i
		}
	}
	for i, k := range of {
		if j, ok := index[k]; ok {
			whole[i] = j
		} else {
			whole[i] = -1
		}
	}
	d.Groups, d.Zero = foldZeros(groupKeys(of), d.Values, whole)
	if d.Groups == nil {
		d.Groups = []group{}
	}
	if d.Zero == nil {
		d.Zero = []chart{}
	}
	d.Headline = headline(d, recs)
	d.Series = timelineSeries()

	if err := addTimelines(d, recs, src, opt); err != nil {
		return nil, err
	}
	for j, b := range bals {
		if b != nil && j < len(recs) {
			n := strconv.FormatInt(recs[j].Step, 10)
			d.Balance[n] = b.locate(d.Timelines[n])
		}
	}
	return d, nil
}

// Write writes the report of the run in outDir to w.
func Write(w io.Writer, outDir string, opt Options) error {
	opt = opt.withDefaults()
	return writeFrom(w, outDir, newDirSource(outDir), opt, opt.Clock.Now())
}

func writeFrom(w io.Writer, outDir string, src timelineSource, opt Options, now time.Time) error {
	opt = opt.withDefaults()
	recs, bals, err := readSteps(filepath.Join(outDir, "steps.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w in %q: not a run folder, or no step closed yet", ErrNoSteps, outDir)
	}
	if err != nil {
		return fmt.Errorf("read steps: %w", err)
	}
	title := opt.Title
	if title == "" {
		abs, _ := filepath.Abs(outDir)
		title = "vllmstat · " + filepath.Base(abs)
	}
	d, err := build(title, recs, bals, src, opt, now)
	if err != nil {
		return err
	}
	return render(w, d)
}

//go:embed report.js
var script string

//go:embed report.css
var style string

// render writes the page: the data as JSON inside a script element (encoding/json escapes
// "<", so it cannot close the element), then the script that draws it.
func render(w io.Writer, d *pageData) error {
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode report data: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	t := html.EscapeString(d.Title)
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", t, style)
	fmt.Fprintf(bw, "<header><h1>%s</h1><p id=\"summary\"></p></header>\n<main id=\"app\"><noscript>This report draws its charts with JavaScript.</noscript></main>\n", t)
	bw.WriteString("<script type=\"application/json\" id=\"data\">")
	bw.Write(data)
	bw.WriteString("</script>\n<script>\n")
	bw.WriteString(script)
	bw.WriteString("</script>\n</body>\n</html>\n")
	return bw.Flush()
}

// WriteFile writes the report of the run in outDir to path, whole or not at all.
func WriteFile(path, outDir string, opt Options) error {
	var b bytes.Buffer
	if err := Write(&b, outDir, opt); err != nil {
		return err
	}
	return timeline.WriteFileAtomic(path, b.Bytes())
}

// ErrNoSteps is returned for a folder without steps.jsonl.
var ErrNoSteps = errors.New("no steps.jsonl")
