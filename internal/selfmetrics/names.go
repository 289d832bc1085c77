package selfmetrics

import (
	"maps"
	"slices"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// Label is one label of a series.
type Label struct {
	Name, Value string
}

// Names of the series that describe a closed step and a worker's last interval. The step's
// own metric keys become vllmstat_step_<key> (and vllmstat_step_worker_<key> for one worker's
// share) with "/" mapped to "_"; see StepFamily.
const (
	StepNumber     = "vllmstat_step_number"
	StepDuration   = "vllmstat_step_duration_seconds"
	StepWorkers    = "vllmstat_step_workers"
	StepScrapes    = "vllmstat_step_scrapes"
	IntervalDT     = "vllmstat_interval_seconds"
	stepFamily     = "vllmstat_step_"
	workerFamily   = "vllmstat_step_worker_"
	intervalFamily = "vllmstat_interval_"
)

// Label names that the series of steps and intervals use, so that extra labels cannot clash
// with them.
var ReservedLabels = append([]string{"target", "engine", "worker_labels", "result"}, vllm.PromLabels()...)

// StepFamily maps a step metric key to its family name without the "vllmstat_step_" prefix and
// the label its last part becomes, if any; see vllm.PromName, which it calls.
func StepFamily(prefix, key string) (family string, lbl Label) {
	fam, ls := promName(prefix, key, nil)
	if len(ls) > 0 {
		lbl = ls[0]
	}
	return fam, lbl
}

// WalkStep calls fn for every series of a closed step: its number, duration, workers and
// scrapes, each metric key, and each worker's keys (with target and engine labels) when the
// record has them, in the same order every time. labels is reused between calls.
func WalkStep(prefix string, r *step.Record, fn func(name string, labels []Label, v float64)) {
	var ls []Label
	fn(StepNumber, nil, float64(r.Step))
	fn(StepDuration, nil, r.DurationS)
	fn(StepWorkers, nil, float64(r.Workers))
	fn(StepScrapes, append(ls[:0], Label{"result", "ok"}), float64(r.Scrapes.OK))
	fn(StepScrapes, append(ls[:0], Label{"result", "failed"}), float64(r.Scrapes.Failed))
	for _, k := range slices.Sorted(maps.Keys(r.Metrics)) {
		v := r.Metrics[k]
		var fam string
		fam, ls = promName(prefix, k, ls[:0])
		fn(stepFamily+fam, ls, v)
	}
	for i := range r.PerWorker {
		w := &r.PerWorker[i]
		for _, k := range slices.Sorted(maps.Keys(w.Metrics)) {
			v := w.Metrics[k]
			var fam string
			fam, ls = promName(prefix, k, append(ls[:0], Label{"target", w.Target}, Label{"engine", w.Engine}, Label{"worker_labels", window.LabelKey(w.Labels)}))
			fn(workerFamily+fam, ls, v)
		}
	}
}

// WalkInterval calls fn for every value of one worker's interval, as
// vllmstat_interval_<prefix>_<key> with target and engine labels, plus the interval's length
// (when it has one) as vllmstat_interval_seconds. labels is reused between calls.
func WalkInterval(prefix string, iv *step.Interval, fn func(name string, labels []Label, v float64)) {
	ls := []Label{{"target", iv.Target}, {"engine", iv.Engine}, {"worker_labels", iv.Labels}}
	p := intervalFamily + sanitize(prefix) + "_"
	for _, k := range slices.Sorted(maps.Keys(iv.Values)) {
		fn(p+sanitize(k), ls, iv.Values[k])
	}
	if iv.DT > 0 {
		fn(IntervalDT, ls, iv.DT)
	}
}

func sanitize(s string) string { return vllm.Sanitize(s) }

// promName is vllm.PromName, its labels appended to ls.
func promName(prefix, key string, ls []Label) (string, []Label) {
	var buf [2]vllm.Label
	fam, vl := vllm.PromName(prefix, key, buf[:0])
	for _, l := range vl {
		ls = append(ls, Label(l))
	}
	return fam, ls
}
