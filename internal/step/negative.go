package step

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// Every histogram family vllmstat reads counts what cannot be negative: latencies, lengths,
// sizes, speeds. A bucket with a bound below 0 (le="-1") is then no layout of the family: its
// quantiles would be negative, and its other buckets are no better to be trusted. Such a
// worker's increase of the family is refused as a whole (no quantile, no mean, in the step
// and its phases), and the record names the target and the family, for a warning.

// NegativeBounds names a target one of whose workers had a histogram with a bucket below 0 in
// the step: the worker's engine label, and the family's key under the run's metric prefix.
type NegativeBounds struct {
	Target, Engine, Family string
}

// negativeBound reports whether d has a bucket with a bound below 0; its buckets are sorted
// by bound, so the first tells.
func negativeBound(d *window.HistDelta) bool {
	if len(d.Bounds) > 0 {
		return d.Bounds[0] < 0
	}
	return len(d.Buckets) > 0 && d.Buckets[0].Le < 0
}

// negativeBounds lists the targets and families of a's workers refused for a bucket below 0,
// each once, in worker and family order.
func (t *Tracker) negativeBounds(a *acc) []NegativeBounds {
	var out []NegativeBounds
	ids := make([]WorkerID, 0)
	for id, wa := range a.workers {
		if wa.negative != 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, WorkerID.Compare)
	for _, id := range ids {
		wa := a.workers[id]
		for h := range vllm.NumHists {
			if wa.negative&(1<<h) == 0 {
				continue
			}
			fam := vllm.Value{Name: vllm.Hists[h].Name, Kind: wa.kind}.Key(t.opt.Prefix)
			if !slices.ContainsFunc(out, func(n NegativeBounds) bool { return n.Target == id.Target && n.Family == fam }) {
				out = append(out, NegativeBounds{Target: id.Target, Engine: id.Engine, Family: fam})
			}
		}
	}
	return out
}
