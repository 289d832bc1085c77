// Package selfmetrics is vllmstat's own /metrics: the health of its scrapes and sinks, the last
// closed step as gauges, and every worker's last interval. It defines the Prometheus names of
// steps and intervals, which the remote-write sink uses too.
package selfmetrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	reg *prometheus.Registry

	up          *prometheus.GaugeVec
	duration    *prometheus.GaugeVec
	durations   prometheus.Histogram
	scrapes     *prometheus.CounterVec
	failures    *prometheus.CounterVec
	skipped     *prometheus.CounterVec
	bodyBytes   *prometheus.GaugeVec
	targets     prometheus.Gauge
	stepsClosed prometheus.Counter

	// series holds each target's series of every scrape, looked up once: finding them by
	// label value, four times per scrape, was a tenth of the collector's work at a thousand
	// targets.
	series map[string]*targetSeries

	mu        sync.Mutex
	last      *step.Record // the last closed step, without its timeline
	intervals map[step.WorkerID]*keptInterval
	sinks     []namedStats
	samples   []namedStats
	descs     map[string]*prometheus.Desc // by name and label names
}

type targetSeries struct {
	up, duration, bodyBytes prometheus.Gauge
	scrapes                 prometheus.Counter
	// reasons are the failure reasons the target has a series of, so that removing it deletes
	// them by their labels rather than by a search through every target's.
	reasons []string
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
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllmstat_target_up", Help: "Whether the target's last scrape succeeded (1) or failed (0).",
		}, []string{"target"}),
		duration: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllmstat_target_scrape_duration_seconds", Help: "How long the target's last scrape took.",
		}, []string{"target"}),
		durations: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vllmstat_scrape_duration_seconds", Help: "How long scrapes take, over all targets.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		scrapes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllmstat_target_scrapes_total", Help: "Scrapes of the target, successful or not.",
		}, []string{"target"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllmstat_target_scrape_failures_total",
			Help: "Failed scrapes of the target by reason: timeout, refused, http_status, body_too_large, limit, parse, credentials, network, other.",
		}, []string{"target", "reason"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllmstat_target_skipped_ticks_total", Help: "Ticks that found the target's previous scrape still running.",
		}, []string{"target"}),
		bodyBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllmstat_target_scrape_body_bytes", Help: "Size of the target's last page.",
		}, []string{"target"}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllmstat_targets", Help: "Targets being scraped.",
		}),
		stepsClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllmstat_steps_closed_total", Help: "Steps closed.",
		}),
		series:    map[string]*targetSeries{},
		intervals: map[step.WorkerID]*keptInterval{},
		descs:     map[string]*prometheus.Desc{},
	}
	m.reg.MustRegister(m.up, m.duration, m.durations, m.scrapes, m.failures, m.skipped, m.bodyBytes, m.targets, m.stepsClosed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The step, interval and sink families change with every step; they are collected without
	// descriptions, which the registry checks on every gather instead.
	m.reg.MustRegister(dynamic{m})
	return m
}

// Registry returns the registry, for tests and for adding other collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      logAdapter{m.opt.Logger},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// Scraped counts a scrape result.
func (m *Metrics) Scraped(res *scrape.Result) {
	t := res.Target
	s := m.targetSeries(t)
	s.scrapes.Inc()
	s.duration.Set(res.Duration.Seconds())
	m.durations.Observe(res.Duration.Seconds())
	s.bodyBytes.Set(float64(res.BodyBytes))
	if res.Err() != nil {
		s.up.Set(0)
		reason := res.Reason()
		m.failures.WithLabelValues(t, reason).Inc()
		if !slices.Contains(s.reasons, reason) {
			s.reasons = append(s.reasons, reason)
		}
		return
	}
	s.up.Set(1)
}

// targetSeries returns target's series of every scrape.
func (m *Metrics) targetSeries(target string) *targetSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.series[target]
	if s == nil {
		s = &targetSeries{
			up: m.up.WithLabelValues(target), duration: m.duration.WithLabelValues(target),
			bodyBytes: m.bodyBytes.WithLabelValues(target), scrapes: m.scrapes.WithLabelValues(target),
		}
		m.series[target] = s
	}
	return s
}

// Skipped counts a tick that found the target's previous scrape still running.
func (m *Metrics) Skipped(target string) { m.skipped.WithLabelValues(target).Inc() }

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
// change of one: each series is deleted by its labels (DeletePartialMatch searches every
// target's series, which made removing N of N targets take N² steps).
func (m *Metrics) TargetsChanged(added, removed []string) {
	for _, t := range added {
		m.scrapes.WithLabelValues(t)
		m.skipped.WithLabelValues(t)
	}
	series := make([]*targetSeries, len(removed))
	m.mu.Lock()
	for i, t := range removed {
		series[i] = m.series[t]
		delete(m.series, t)
	}
	m.mu.Unlock()
	for i, t := range removed {
		m.up.DeleteLabelValues(t)
		m.duration.DeleteLabelValues(t)
		m.scrapes.DeleteLabelValues(t)
		m.skipped.DeleteLabelValues(t)
		m.bodyBytes.DeleteLabelValues(t)
		if s := series[i]; s != nil {
			for _, r := range s.reasons {
				m.failures.DeleteLabelValues(t, r)
			}
		}
	}
	m.targets.Add(float64(len(added) - len(removed)))
	if len(removed) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, t := range removed {
		gone[t] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
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

// keptInterval is a worker's last interval. iv.Values is the tracker's map, reused for the next
// interval: its values are copied, as a list (a map of each worker's, rewritten thousands of
// times a second, cost more than all the rest of the self-metrics). A scrape of the
// self-metrics makes the map again.
type keptInterval struct {
	iv     step.Interval // without Values
	names  []string
	values []float64
}

func (k *keptInterval) set(iv *step.Interval) {
	k.iv = *iv
	k.iv.Values = nil
	k.names, k.values = k.names[:0], k.values[:0]
	for n, v := range iv.Values {
		k.names = append(k.names, n)
		k.values = append(k.values, v)
	}
}

func (k *keptInterval) interval() step.Interval {
	iv := k.iv
	iv.Values = make(map[string]float64, len(k.names))
	for i, n := range k.names {
		iv.Values[n] = k.values[i]
	}
	return iv
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

// dynamic collects the families whose series change from step to step.
type dynamic struct{ m *Metrics }

func (dynamic) Describe(chan<- *prometheus.Desc) {}

func (d dynamic) Collect(ch chan<- prometheus.Metric) {
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	emit := func(name string, vt prometheus.ValueType, ls []promname.Label, v float64) {
		names := make([]string, len(ls))
		values := make([]string, len(ls))
		for i, l := range ls {
			names[i], values[i] = l.Name, l.Value
		}
		ch <- prometheus.MustNewConstMetric(m.desc(name, names), vt, v, values...)
	}
	gauge := func(name string, ls []promname.Label, v float64) { emit(name, prometheus.GaugeValue, ls, v) }
	for _, s := range m.sinks {
		ls := []promname.Label{{Name: "sink", Value: s.name}}
		emit("vllmstat_sink_queue_length", prometheus.GaugeValue, ls, float64(s.st.Queued.Load()))
		emit("vllmstat_sink_written_total", prometheus.CounterValue, ls, float64(s.st.Written.Load()))
		emit("vllmstat_sink_errors_total", prometheus.CounterValue, ls, float64(s.st.Errors.Load()))
		emit("vllmstat_sink_dropped_total", prometheus.CounterValue, ls, float64(s.st.Dropped.Load()))
	}
	for _, s := range m.samples {
		ls := []promname.Label{{Name: "sink", Value: s.name}}
		emit("vllmstat_sink_samples_queued", prometheus.GaugeValue, ls, float64(s.st.Queued.Load()))
		emit("vllmstat_sink_samples_written_total", prometheus.CounterValue, ls, float64(s.st.Written.Load()))
		emit("vllmstat_sink_request_errors_total", prometheus.CounterValue, ls, float64(s.st.Errors.Load()))
		emit("vllmstat_sink_samples_dropped_total", prometheus.CounterValue, ls, float64(s.st.Dropped.Load()))
	}
	if r := m.last; r != nil {
		promname.WalkStep(m.opt.Prefix, r, gauge)
		gauge("vllmstat_step_end_timestamp_seconds", nil, float64(r.End.UnixMilli())/1e3)
	}
	for _, k := range m.intervals {
		iv := k.interval()
		promname.WalkInterval(m.opt.Prefix, &iv, gauge)
		gauge("vllmstat_interval_timestamp_seconds", []promname.Label{{Name: "target", Value: iv.Target}, {Name: "engine", Value: iv.Engine}, {Name: "worker_labels", Value: iv.Labels}}, float64(iv.TS.UnixMilli())/1e3)
	}
}

// desc returns the description of a family with the given label names, made once. Callers hold
// m.mu.
func (m *Metrics) desc(name string, labels []string) *prometheus.Desc {
	key := name + "\xff" + strings.Join(labels, "\xff")
	if d, ok := m.descs[key]; ok {
		return d
	}
	d := prometheus.NewDesc(name, help(m.opt.Prefix, name), labels, nil)
	m.descs[key] = d
	return d
}

// help describes a dynamic family; it depends on the name only, as the registry requires.
func help(prefix, name string) string {
	switch name {
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

type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Println(v ...any) { l.log.Error("serve /metrics", "err", fmt.Sprint(v...)) }
