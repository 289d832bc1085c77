// Package step pools the windowed values of every worker into per-step records: totals, the
// token-weighted prefix-cache hit rate, throughput, mean/max/p95 of the per-interval samples and
// histogram quantiles. It is pure logic: the caller supplies every timestamp.
package step

import (
	"cmp"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Record is one closed step, written as one JSON line. Its fields and keys are a fixed format
// that other tools read.
type Record struct {
	Step      int64     `json:"step"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	DurationS float64   `json:"duration_s"`
	Scrapes   Scrapes   `json:"scrapes"`
	Workers   int       `json:"workers"`
	// Metrics are Values by their keys under the run's metric prefix (see flatten).
	Metrics map[string]float64 `json:"metrics"`
	// Phases are the step's phases by name (see Phase); absent when it had none.
	Phases map[string]*Phase `json:"phases,omitempty"`
	// Stragglers and WorstWorkers name the workers behind the fleet-balance keys; absent when
	// there are none (see balance.go).
	Stragglers   []Straggler   `json:"stragglers,omitempty"`
	WorstWorkers *WorstWorkers `json:"worst_workers,omitempty"`
	// EngineWorstWorkers name, in a fleet of several engine kinds, the worst workers of the
	// kinds after the first (vLLM's, when it has vLLM workers), by the kind's default prefix
	// ("sglang"); each kind's keys are its own. Absent in a fleet of one kind.
	EngineWorstWorkers map[string]*WorstWorkers `json:"engine_worst_workers,omitempty"`
	PerWorker          []WorkerRecord           `json:"per_worker,omitempty"`
	Plots              []string                 `json:"plots,omitempty"`

	// Values are the step's numbers by family, label and statistic, in no particular order,
	// which Metrics spells as keys; not part of the JSON line, and nil in records read back
	// from one.
	Values []vllm.Value `json:"-"`
	// Timeline holds every sample of the step; not part of the JSON line, and nil from a
	// tracker that keeps no timelines (Options.NoTimeline).
	Timeline *Timeline `json:"-"`
	// Forgotten are the workers the tracker forgot as the step closed, sorted: their targets
	// answered in the step, but no page showed them (see Tracker.EndStep). Whatever keeps
	// something per worker drops theirs. Not part of the JSON line.
	Forgotten []WorkerID `json:"-"`
	// RatiosOver name the targets whose counters of a ratio of two counts contradicted each
	// other over the step, the ratio's key left out (see RatioOver); nil when none did. Not
	// part of the JSON line.
	RatiosOver []RatioOver `json:"-"`
	// Publishes are the policy versions the trainer published in the step, in order; not part
	// of the JSON line (the step's span shows them as events).
	Publishes []Publish `json:"-"`
	// Restarts are the engine restarts the step's scrapes showed, in the order seen (see
	// window.Increase.Restarted); not part of the JSON line (the step's span shows them as
	// events).
	Restarts []Restart `json:"-"`
	// RestartsUnlisted counts the step's restarts beyond those Restarts lists (the first
	// maxRestarts); not part of the JSON line.
	RestartsUnlisted int `json:"-"`
	// TraceParent is the W3C traceparent the trainer gave with the step's end (its own step
	// span), which the step's span is a child of; "" when none. Not part of the JSON line.
	TraceParent string `json:"-"`
	// NegativeBounds name the targets whose pages gave a histogram a bucket below 0 in the
	// step, refused (see negativeBound); nil when none did. Not part of the JSON line.
	NegativeBounds []NegativeBounds `json:"-"`
}

// flatten makes the keys of the record's and its workers' Values under prefix: the one place
// where a tracker's typed values become the flat keys that every writer of records uses.
func (r *Record) flatten(prefix string) {
	r.Metrics = vllm.Flat(prefix, r.Values)
	for i := range r.PerWorker {
		w := &r.PerWorker[i]
		w.Metrics = vllm.Flat(prefix, w.Values)
	}
}

// Publish is a policy version the trainer published, and when.
type Publish struct {
	Version int64
	At      time.Time
}

// Restart is a worker whose page showed that its process restarted since its last page, and
// the time of that scrape.
type Restart struct {
	Worker WorkerID
	At     time.Time
}

// Scrapes counts the step's scrapes of all targets.
type Scrapes struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
}

// WorkerRecord holds the same keys as Record.Metrics, computed for one worker.
type WorkerRecord struct {
	Target string `json:"target"`
	Engine string `json:"engine"`
	// Labels are the worker's worker labels (Ray's ReplicaId, WorkerId), left out when it has
	// none, so that records of pages without them keep their bytes.
	Labels  map[string]string  `json:"labels,omitempty"`
	Metrics map[string]float64 `json:"metrics"`
	// Values are what Metrics spells as keys; not part of the JSON line.
	Values []vllm.Value `json:"-"`
	// TargetLabels are the labels discovery gave the worker's target (file_sd's "labels");
	// absent when it has none. Shared between records: read only.
	TargetLabels map[string]string `json:"target_labels,omitempty"`
}

// WorkerID names a worker: one vLLM engine, the target plus its engine label ("" when absent)
// plus the values of the worker labels its samples carry (see page.Options.WorkerLabels).
type WorkerID struct {
	Target string
	Engine string
	// Labels are the worker labels as window keys them (`ReplicaId="r1",WorkerId="w1"`), ""
	// when there are none; LabelMap decodes them.
	Labels string
}

// LabelMap returns the worker labels as a map, nil when there are none.
func (id WorkerID) LabelMap() map[string]string { return page.LabelMap(id.Labels) }

// Compare orders workers by target, engine, then worker labels.
func (id WorkerID) Compare(o WorkerID) int {
	return cmp.Or(strings.Compare(id.Target, o.Target), strings.Compare(id.Engine, o.Engine), strings.Compare(id.Labels, o.Labels))
}

// Timeline is every per-interval sample of a step, per worker, for plots and reports.
type Timeline struct {
	Start   time.Time
	Workers []WorkerTimeline // sorted by target, engine, worker labels
}

// WorkerTimeline holds one worker's series, keyed by metric name without prefix (e.g.
// "kv_cache_usage_perc", "num_preemptions", "prefix_cache_hit_rate").
type WorkerTimeline struct {
	WorkerID
	Series map[string][]Point
	// Activity is the worker's busy and idle time, nil when none of its samples covered any
	// time.
	Activity *Activity
}

// Point is one sample at an offset from the step start.
type Point struct {
	OffsetS float64 `json:"t"`
	Value   float64 `json:"v"`
}
