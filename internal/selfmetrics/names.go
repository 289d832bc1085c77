package selfmetrics

import (
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
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
var ReservedLabels = []string{"target", "engine", "worker_labels", "stat", "reason", "result"}

// stats are the key suffixes that become a stat label: aggregates of the per-interval samples
// (mean, max, p95), histogram quantiles (p50, p95, p99, mean) and the worst worker's value
// (prefix_cache_hit_rate/worst_worker beside the fleet's prefix_cache_hit_rate).
var stats = map[string]bool{"mean": true, "max": true, "p50": true, "p95": true, "p99": true, "worst_worker": true}

// StepFamily maps a step metric key to its family name without the "vllmstat_step_" prefix and
// the label its last part becomes, if any: "vllm/kv_cache_usage_perc/p95" is
// ("vllm_kv_cache_usage_perc", stat="p95"), "vllm/request_success/stop" is
// ("vllm_request_success", reason="stop"), "vllm/prefix_cache_hit_rate" is
// ("vllm_prefix_cache_hit_rate", no label). prefix is the run's metric prefix, which may itself
// contain "/".
func StepFamily(prefix, key string) (family string, lbl Label) {
	rest, ok := strings.CutPrefix(key, prefix+"/")
	if !ok {
		return sanitize(key), Label{}
	}
	parts := strings.Split(rest, "/")
	switch n := len(parts); {
	case n == 2 && parts[0] == "request_success":
		parts, lbl = parts[:1], Label{"reason", parts[1]}
	case n >= 2 && stats[parts[n-1]]:
		parts, lbl = parts[:n-1], Label{"stat", parts[n-1]}
	}
	return sanitize(prefix) + "_" + sanitize(strings.Join(parts, "_")), lbl
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
		fam, l := StepFamily(prefix, k)
		ls = ls[:0]
		if l.Name != "" {
			ls = append(ls, l)
		}
		fn(stepFamily+fam, ls, v)
	}
	for i := range r.PerWorker {
		w := &r.PerWorker[i]
		for _, k := range slices.Sorted(maps.Keys(w.Metrics)) {
			v := w.Metrics[k]
			fam, l := StepFamily(prefix, k)
			ls = append(ls[:0], Label{"target", w.Target}, Label{"engine", w.Engine}, Label{"worker_labels", window.LabelKey(w.Labels)})
			if l.Name != "" {
				ls = append(ls, l)
			}
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

// sanitize turns a key into a valid metric name part: characters outside [a-zA-Z0-9_] become
// "_", and the abbreviated unit "s" (as in tokens_per_s) is spelled out, which promtool asks
// for.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	words := strings.Split(string(b), "_")
	for i, w := range words {
		if w == "s" {
			if i > 0 && words[i-1] == "per" {
				words[i] = "second"
			} else {
				words[i] = "seconds"
			}
		}
	}
	return strings.Join(words, "_")
}
