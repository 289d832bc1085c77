// Package promname names closed steps and workers' intervals as Prometheus series: one
// family per metric key, the key's parts (statistic, reason) and the phase as labels. Remote
// write sends these series and vllmstat's own /metrics shows them, so that both name a step
// alike; the naming of one key is vllm.PromName's.
package promname

import (
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Label is one label of a series.
type Label struct {
	Name, Value string
}

// Names of the series that describe a closed step and a worker's last interval. The step's
// own metric keys become vllmstat_step_<key> (and vllmstat_step_worker_<key> for one worker's
// share) with "/" mapped to "_"; see StepFamily.
const (
	StepNumber   = "vllmstat_step_number"
	StepDuration = "vllmstat_step_duration_seconds"
	StepWorkers  = "vllmstat_step_workers"
	StepScrapes  = "vllmstat_step_scrapes"
	// StepPhaseIntervals counts, with a phase label, the times a phase was open in the step.
	StepPhaseIntervals = "vllmstat_step_phase_intervals"
	IntervalDT         = "vllmstat_interval_seconds"
)

// The families of a step's keys, of one worker's share of them, and of a worker's interval
// begin with these.
const (
	StepFamilyPrefix     = "vllmstat_step_"
	WorkerFamilyPrefix   = "vllmstat_step_worker_"
	IntervalFamilyPrefix = "vllmstat_interval_"
)

// Label names that the series of steps and intervals use, so that extra labels cannot clash
// with them.
var ReservedLabels = append([]string{"target", "engine", "worker_labels", "result", "phase"}, vllm.PromLabels()...)

// StepFamily maps a step metric key to its family name without the "vllmstat_step_" prefix and
// the first label its parts become, if any; see vllm.PromName, which it calls. Records from a
// tracker need no keys taken apart: WalkStep names their typed values.
func StepFamily(prefix, key string) (family string, lbl Label) {
	fam, ls := vllm.PromName(prefix, key, nil)
	if len(ls) > 0 {
		lbl = Label(ls[0])
	}
	return fam, lbl
}

// WalkStep calls fn for every series of a closed step: its number, duration, workers and
// scrapes, each metric key, each phase's duration, intervals and keys, and each worker's keys
// (with target and engine labels) when the record has them, in the same order every time (by
// key, phases by name). labels is reused between calls. A tracker's record is named from its
// typed values; one that carries only keys (read back from its JSON line, or built by hand) has
// them taken apart by vllm.PromName.
//
// A phase's series are the whole step's families with a phase label ("vllm/rollout/..." of the
// trackers is vllmstat_step_vllm_prefix_cache_hit_rate{phase="rollout"}), so that one query
// reads a key over the whole step and each phase; whole-step series have no phase label.
func WalkStep(prefix string, r *step.Record, fn func(name string, labels []Label, v float64)) {
	var ls []Label
	fn(StepNumber, nil, float64(r.Step))
	fn(StepDuration, nil, r.DurationS)
	fn(StepWorkers, nil, float64(r.Workers))
	fn(StepScrapes, append(ls[:0], Label{"result", "ok"}), float64(r.Scrapes.OK))
	fn(StepScrapes, append(ls[:0], Label{"result", "failed"}), float64(r.Scrapes.Failed))
	walkValues(prefix, StepFamilyPrefix, r.Values, r.Metrics, nil, fn)
	for _, name := range slices.Sorted(maps.Keys(r.Phases)) {
		ph := r.Phases[name]
		if ph == nil {
			continue
		}
		pl := []Label{{"phase", name}}
		fn(StepDuration, pl, ph.DurationS)
		fn(StepPhaseIntervals, pl, float64(ph.Intervals))
		walkValues(prefix, StepFamilyPrefix, ph.Values, ph.Metrics, pl, fn)
	}
	for i := range r.PerWorker {
		w := &r.PerWorker[i]
		walkValues(prefix, WorkerFamilyPrefix, w.Values, w.Metrics, []Label{{"target", w.Target}, {"engine", w.Engine}, {"worker_labels", page.LabelKey(w.Labels)}}, fn)
	}
}

// walkValues calls fn for each of vs (or, when vs is nil, each key of m), sorted by key, as
// family+<Prometheus name> with the labels base plus its own.
func walkValues(prefix, family string, vs []vllm.Value, m map[string]float64, base []Label, fn func(string, []Label, float64)) {
	ls := slices.Clone(base)
	var buf [2]vllm.Label
	emit := func(fam string, vl []vllm.Label, v float64) {
		ls = ls[:len(base)]
		for _, l := range vl {
			ls = append(ls, Label(l))
		}
		fn(family+fam, ls, v)
	}
	if vs == nil {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fam, vl := vllm.PromName(prefix, k, buf[:0])
			emit(fam, vl, m[k])
		}
		return
	}
	type keyed struct {
		key string
		v   vllm.Value
	}
	ks := make([]keyed, len(vs))
	for i, v := range vs {
		ks[i] = keyed{v.Key(prefix), v}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for _, k := range ks {
		fam, vl := k.v.PromName(prefix, buf[:0])
		emit(fam, vl, k.v.V)
	}
}

// WalkInterval calls fn for every value of one worker's interval, in its order, as IntervalName
// names it, with the labels IntervalLabels gives, plus the interval's length (when it has one)
// as vllmstat_interval_seconds. labels is reused between calls.
func WalkInterval(prefix string, iv *step.Interval, fn func(name string, labels []Label, v float64)) {
	ls := IntervalLabels(iv.WorkerID)
	p := intervalPrefix(prefix, iv.Kind)
	for _, v := range iv.Values {
		fn(p+vllm.Sanitize(v.Key), ls, v.V)
	}
	if iv.DT > 0 {
		fn(IntervalDT, ls, iv.DT)
	}
}

// IntervalName is the family of an interval's value of key for a worker of kind:
// vllmstat_interval_<prefix>_<key>, with the prefix of the worker's engine kind (see
// vllm.EnginePrefix).
func IntervalName(prefix string, kind vllm.Engine, key string) string {
	return intervalPrefix(prefix, kind) + vllm.Sanitize(key)
}

func intervalPrefix(prefix string, kind vllm.Engine) string {
	return IntervalFamilyPrefix + vllm.Sanitize(vllm.EnginePrefix(prefix, kind)) + "_"
}

// IntervalLabels are the labels of a worker's interval series: its target, engine and worker
// labels.
func IntervalLabels(id step.WorkerID) []Label {
	return []Label{{"target", id.Target}, {"engine", id.Engine}, {"worker_labels", id.Labels}}
}
