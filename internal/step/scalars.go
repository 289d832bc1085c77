package step

import (
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The statistics of a pool's per-interval samples (vllm.IntervalStats: mean, max and p95) of
// every family with Scalars: gauges ("num_requests_running/p95", "kv_cache_usage_perc/mean",
// split ones by their label's value), ratios ("prefix_cache_hit_rate/mean") and counters' per
// interval increases ("num_preemptions/max"). They are given only with Options.Scalars: an open
// step keeps the samples only then (see keep).

// scalarKeys adds the statistics of the pool's per-interval samples.
func (m *poolKeys) scalarKeys(was []*workerAcc) {
	var buf []float64 // one pool's samples at a time
	for g, f := range vllm.Gauges[:vllm.NumKeyedGauges] {
		switch {
		case !f.Scalars:
		case f.Split != "":
			values := map[string]bool{}
			for _, wa := range was {
				for v := range wa.splitGaugeOf(vllm.Gauge(g)) {
					values[v] = true
				}
			}
			for v := range values {
				m.pool(f.Name, v, was, &buf, func(wa *workerAcc, xs []float64) []float64 {
					if c := wa.splitGaugeOf(vllm.Gauge(g))[v]; c != nil {
						return c.appendTo(xs)
					}
					return xs
				})
			}
		default:
			m.pool(f.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 { return wa.gauges[g].v.appendTo(xs) })
		}
	}
	for i, rt := range vllm.Ratios {
		if rt.Scalars {
			m.pool(rt.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 {
				if wa.ratioOver(i) {
					return xs // its intervals are no figures either (see ratioover.go)
				}
				return wa.appendRatios(i, rt.Fraction, xs)
			})
		}
	}
	for c, f := range vllm.Counters {
		if f.Scalars {
			m.pool(f.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 { return wa.delta(vllm.Counter(c)).v.appendTo(xs) })
		}
	}
}

// pool adds mean/max/p95 of the samples of all workers as statistics of name and label. The
// samples are pooled worker by worker, each worker's in scrape order, so that the mean adds
// them up in one order whatever the pool; buf is reused from one pool to the next. get appends
// a worker's samples to xs and returns it (a closure per worker to take them, as a callback,
// was most of a fleet's step-end allocations).
func (m *poolKeys) pool(name, label string, was []*workerAcc, buf *[]float64, get func(wa *workerAcc, xs []float64) []float64) {
	xs := (*buf)[:0]
	for _, wa := range was {
		xs = get(wa, xs)
	}
	*buf = xs
	if s, ok := summarize(xs); ok {
		for _, st := range vllm.IntervalStats {
			m.add(name, label, st, s.of(st))
		}
	}
}
