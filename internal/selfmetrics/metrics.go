// Package selfmetrics is vllmstat's own /metrics: the health of its scrapes and sinks, the last
// closed step as gauges, and every worker's last interval. It defines the Prometheus names of
// steps and intervals, which the remote-write sink uses too.
package selfmetrics

import (
	"bufio"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Options configure Metrics.
type Options struct {
	// Prefix is the run's metric prefix, the first part of every step key; default "vllm".
	Prefix string
	// Logger receives errors met while serving /metrics; nil discards them.
	Logger *slog.Logger
}

// Metrics holds vllmstat's own metrics in a registry of its own. It implements the collector's
// Observer (its methods run on the collector goroutine and never block for long), takes the
// tracker's intervals through Interval, and serves everything through Handler.
type Metrics struct {
	opt Options
	// reg holds the families of fixed series: the Go runtime's, the process's, and vllmstat's
	// own totals. The families with a series per target, worker or sink are written from the
	// fields below (see textPage).
	reg *prometheus.Registry

	durations   prometheus.Histogram
	targets     prometheus.Gauge
	stepsClosed prometheus.Counter

	mu sync.Mutex
	// series holds each target's series of every scrape, updated under mu. As client_golang
	// vectors they took 3 to 5 KB a target, and finding them by label value four times per
	// scrape was a tenth of the collector's work at a thousand targets.
	series    map[string]*targetSeries
	last      *step.Record // the last closed step, without its timeline
	intervals map[step.WorkerID]*keptInterval
	sinks     []namedStats
	samples   []namedStats
	names     map[nameKey]string // intervalName's
	pageSize  int                // of the last page built
}

// targetSeries is one target's series of every scrape.
type targetSeries struct {
	up, duration, bodyBytes float64
	scraped                 bool // up, duration and bodyBytes are set
	scrapes, skipped        float64
	failures                []reasonCount // in the order the reasons first came
}

type reasonCount struct {
	reason string
	n      float64
}

type namedStats struct {
	name string
	st   *sink.Stats
}

// New returns Metrics with every family registered, including the Go runtime and process
// collectors.
func New(opt Options) *Metrics {
	if opt.Prefix == "" {
		opt.Prefix = vllm.Prefix
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		opt: opt,
		reg: prometheus.NewRegistry(),
		durations: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vllmstat_scrape_duration_seconds", Help: "How long scrapes take, over all targets.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllmstat_targets", Help: "Targets being scraped.",
		}),
		stepsClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllmstat_steps_closed_total", Help: "Steps closed.",
		}),
		series:    map[string]*targetSeries{},
		intervals: map[step.WorkerID]*keptInterval{},
		names:     map[nameKey]string{},
	}
	m.reg.MustRegister(m.durations, m.targets, m.stepsClosed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry of the fixed families, for adding other collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format, gzipped when the client accepts it.
func (m *Metrics) Handler() http.Handler { return gzipped(http.HandlerFunc(m.serve)) }

// gzipped compresses answers for clients that accept gzip, at the fastest level: the page is
// megabytes at a thousand targets, and is served on the machine that scrapes the fleet.
var gzipped = func() func(http.Handler) http.HandlerFunc {
	wrap, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.BestSpeed), gzhttp.EnableZstd(false))
	if err != nil {
		panic(err) // the options are fixed: only a programming error gets here
	}
	return wrap
}()

func (m *Metrics) serve(w http.ResponseWriter, r *http.Request) {
	fams, err := m.reg.Gather()
	if err != nil {
		// What could be gathered is served, as promhttp's ContinueOnError does.
		m.opt.Logger.Error("serve /metrics", "err", err)
	}
	pg := m.page()
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := expfmt.NewEncoder(bw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return // the client went away
		}
	}
	if pg.writeTo(bw) == nil {
		bw.Flush()
	}
}

// page builds the families with a series per target, worker or sink, under mu.
func (m *Metrics) page() *textPage {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The page's size is about the last one's (for the first, about 100 bytes a line): one
	// allocation rather than a dozen copies.
	size := m.pageSize + m.pageSize/8
	if size == 0 {
		size = 100 * (6*len(m.series) + 16*len(m.intervals))
	}
	p := newTextPage(size, func(name string) string { return help(m.opt.Prefix, name) })
	emit := p.add
	ls := []promname.Label{{Name: "target"}, {Name: "reason"}}
	for _, t := range slices.Sorted(maps.Keys(m.series)) {
		s := m.series[t]
		ls[0].Value = t
		tl := ls[:1]
		emit("vllmstat_target_scrapes_total", "counter", tl, s.scrapes)
		emit("vllmstat_target_skipped_ticks_total", "counter", tl, s.skipped)
		if s.scraped {
			emit("vllmstat_target_up", "gauge", tl, s.up)
			emit("vllmstat_target_scrape_duration_seconds", "gauge", tl, s.duration)
			emit("vllmstat_target_scrape_body_bytes", "gauge", tl, s.bodyBytes)
		}
		for _, f := range s.failures {
			ls[1].Value = f.reason
			emit("vllmstat_target_scrape_failures_total", "counter", ls, f.n)
		}
	}
	gauge := func(name string, ls []promname.Label, v float64) { emit(name, "gauge", ls, v) }
	for _, s := range m.sinks {
		ls := []promname.Label{{Name: "sink", Value: s.name}}
		emit("vllmstat_sink_queue_length", "gauge", ls, float64(s.st.Queued.Load()))
		emit("vllmstat_sink_written_total", "counter", ls, float64(s.st.Written.Load()))
		emit("vllmstat_sink_errors_total", "counter", ls, float64(s.st.Errors.Load()))
		emit("vllmstat_sink_dropped_total", "counter", ls, float64(s.st.Dropped.Load()))
	}
	for _, s := range m.samples {
		ls := []promname.Label{{Name: "sink", Value: s.name}}
		emit("vllmstat_sink_samples_queued", "gauge", ls, float64(s.st.Queued.Load()))
		emit("vllmstat_sink_samples_written_total", "counter", ls, float64(s.st.Written.Load()))
		emit("vllmstat_sink_request_errors_total", "counter", ls, float64(s.st.Errors.Load()))
		emit("vllmstat_sink_samples_dropped_total", "counter", ls, float64(s.st.Dropped.Load()))
	}
	if r := m.last; r != nil {
		promname.WalkStep(m.opt.Prefix, r, gauge)
		gauge("vllmstat_step_end_timestamp_seconds", nil, float64(r.End.UnixMilli())/1e3)
	}
	// Each worker's values as promname.WalkInterval names them, with the names made once.
	for _, id := range slices.SortedFunc(maps.Keys(m.intervals), step.WorkerID.Compare) {
		k := m.intervals[id]
		ls := promname.IntervalLabels(id)
		for _, v := range k.values {
			gauge(m.intervalName(k.iv.Kind, v.Key), ls, v.V)
		}
		if k.iv.DT > 0 {
			gauge(promname.IntervalDT, ls, k.iv.DT)
		}
		gauge("vllmstat_interval_timestamp_seconds", ls, float64(k.iv.TS.UnixMilli())/1e3)
	}
	m.pageSize = len(p.buf)
	return p
}

// intervalName is promname.IntervalName, made once per engine kind and key; callers hold mu.
func (m *Metrics) intervalName(kind vllm.Engine, key string) string {
	nk := nameKey{kind, key}
	n, ok := m.names[nk]
	if !ok {
		n = promname.IntervalName(m.opt.Prefix, kind, key)
		m.names[nk] = n
	}
	return n
}

type nameKey struct {
	kind vllm.Engine
	key  string
}

// Scraped counts a scrape result.
func (m *Metrics) Scraped(res *scrape.Result) {
	m.durations.Observe(res.Duration.Seconds())
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.targetSeries(res.Target)
	s.scrapes++
	s.scraped = true
	s.duration = res.Duration.Seconds()
	s.bodyBytes = float64(res.BodyBytes)
	if res.Err() == nil {
		s.up = 1
		return
	}
	s.up = 0
	reason := res.Reason()
	for i := range s.failures {
		if s.failures[i].reason == reason {
			s.failures[i].n++
			return
		}
	}
	s.failures = append(s.failures, reasonCount{reason, 1})
}

// targetSeries returns target's series of every scrape; callers hold mu.
func (m *Metrics) targetSeries(target string) *targetSeries {
	s := m.series[target]
	if s == nil {
		s = &targetSeries{}
		m.series[target] = s
	}
	return s
}

// Skipped counts a tick that found the target's previous scrape still running.
func (m *Metrics) Skipped(target string) {
	m.mu.Lock()
	m.targetSeries(target).skipped++
	m.mu.Unlock()
}

// StepClosed makes rec the step the vllmstat_step_* gauges show, and deletes the last
// intervals of the workers the tracker forgot as it closed (rec.Forgotten).
func (m *Metrics) StepClosed(rec *step.Record) {
	m.stepsClosed.Inc()
	r := *rec
	r.Timeline, r.Forgotten = nil, nil
	m.mu.Lock()
	m.last = &r
	for _, id := range rec.Forgotten {
		delete(m.intervals, id)
	}
	m.mu.Unlock()
}

// TargetsChanged starts the counters of added targets at zero and deletes every series of
// removed ones, their last intervals included. Its cost is in proportion to the targets named
// and the intervals kept, so that a change of many targets costs as much per target as a
// change of one.
func (m *Metrics) TargetsChanged(added, removed []string) {
	m.targets.Add(float64(len(added) - len(removed)))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range added {
		m.targetSeries(t)
	}
	if len(removed) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, t := range removed {
		delete(m.series, t)
		gone[t] = true
	}
	for id := range m.intervals {
		if gone[id.Target] {
			delete(m.intervals, id)
		}
	}
}

// Interval keeps a worker's last interval for the vllmstat_interval_* gauges; chain it into
// step.Options.OnInterval.
func (m *Metrics) Interval(iv step.Interval) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.intervals[iv.WorkerID]
	if k == nil {
		k = &keptInterval{}
		m.intervals[iv.WorkerID] = k
	}
	k.set(&iv)
}

// keptInterval is a worker's last interval. iv.Values is the tracker's list, reused for the next
// interval: its values are copied (a map of each worker's, rewritten thousands of times a
// second, cost more than all the rest of the self-metrics).
type keptInterval struct {
	iv     step.Interval // without Values
	values []step.IntervalValue
}

func (k *keptInterval) set(iv *step.Interval) {
	k.iv = *iv
	k.iv.Values = nil
	k.values = append(k.values[:0], iv.Values...)
}

// AddSink exposes a sink queue's counters (of step records) under the sink label name.
func (m *Metrics) AddSink(name string, st *sink.Stats) {
	m.mu.Lock()
	m.sinks = append(m.sinks, namedStats{name, st})
	m.mu.Unlock()
}

// AddSampleSink exposes the counters of a sink that counts samples rather than records (the
// remote-write writer's Stats) under the sink label name.
func (m *Metrics) AddSampleSink(name string, st *sink.Stats) {
	m.mu.Lock()
	m.samples = append(m.samples, namedStats{name, st})
	m.mu.Unlock()
}

// help describes a family of the page; it depends on the name only.
func help(prefix, name string) string {
	switch name {
	case "vllmstat_target_scrapes_total":
		return "Scrapes of the target, successful or not."
	case "vllmstat_target_skipped_ticks_total":
		return "Ticks that found the target's previous scrape still running."
	case "vllmstat_target_up":
		return "Whether the target's last scrape succeeded (1) or failed (0)."
	case "vllmstat_target_scrape_duration_seconds":
		return "How long the target's last scrape took."
	case "vllmstat_target_scrape_body_bytes":
		return "Size of the target's last page."
	case "vllmstat_target_scrape_failures_total":
		return "Failed scrapes of the target by reason: timeout, refused, http_status, body_too_large, limit, parse, credentials, network, other."
	case promname.StepNumber:
		return "Number of the last closed step."
	case promname.StepDuration:
		return "Duration of the last closed step."
	case promname.StepWorkers:
		return "Workers (engines) that answered during the last closed step."
	case promname.StepScrapes:
		return "Scrapes of the last closed step by result (ok, failed)."
	case promname.StepPhaseIntervals:
		return "Times each phase of the last closed step was open in it (a phase open at a step end counts in both steps)."
	case "vllmstat_step_end_timestamp_seconds":
		return "End time of the last closed step, Unix seconds."
	case promname.IntervalDT:
		return "Length of the worker's last interval: the time between its last two successful scrapes."
	case "vllmstat_interval_timestamp_seconds":
		return "Time of the worker's last successful scrape, Unix seconds."
	case "vllmstat_sink_queue_length":
		return "Step records waiting in the sink's queue."
	case "vllmstat_sink_written_total":
		return "Step records the sink has written."
	case "vllmstat_sink_errors_total":
		return "Failed attempts to write a step record to the sink."
	case "vllmstat_sink_dropped_total":
		return "Step records the sink gave up: queue full, retries exhausted, or not written at exit."
	case "vllmstat_sink_samples_queued":
		return "Samples waiting to be sent by the sink."
	case "vllmstat_sink_samples_written_total":
		return "Samples the sink's receiver has accepted."
	case "vllmstat_sink_request_errors_total":
		return "Failed requests of the sink (each retry counts)."
	case "vllmstat_sink_samples_dropped_total":
		return "Samples the sink gave up: buffer full, rejected by the receiver, or not sent at exit."
	}
	if k, ok := strings.CutPrefix(name, promname.WorkerFamilyPrefix); ok {
		return fmt.Sprintf("Last closed step's %s of one worker (stat: aggregate of its per-interval samples or histogram quantile; none: the step's own value).", k)
	}
	if k, ok := strings.CutPrefix(name, promname.StepFamilyPrefix); ok {
		return fmt.Sprintf("Last closed step's %s over all workers (stat: aggregate of the per-interval samples or histogram quantile; none: the step's own value).", k)
	}
	if k, ok := strings.CutPrefix(name, promname.IntervalFamilyPrefix+vllm.Sanitize(prefix)+"_"); ok {
		return fmt.Sprintf("Worker's %s over its last interval (counters: the increase; gauges: the value at its scrape).", k)
	}
	return name
}
