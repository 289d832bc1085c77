package step

import (
	"math"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The histogram keys of a pool: each histogram's quantiles (vllm.HistQuantiles:
// "time_to_first_token_seconds/p50", "/p95", "/p99"), with the range a quantile is known to lie
// in where the buckets tell no more ("/p95_lo", "/p95_hi"), and its mean ("/mean") from the
// sum and count. How a quantile is estimated and bounded is in stats.go.

// quantileKeys adds the quantiles and means of the pool's histograms, added up in s.
func (m *poolKeys) quantileKeys(s *poolTotals) {
	for h, d := range s.hists {
		if d == nil || d.count <= 0 || !countsFinite(d) {
			continue // no observations, or more than a float holds: no quantile can be told
		}
		name := vllm.Hists[h].Name
		buckets, ok := sortedBuckets(d.buckets())
		for _, q := range vllm.HistQuantiles {
			if !ok {
				break
			}
			if e, ok := boundedQuantile(q.Q, buckets, d.sum, !d.noSum); ok {
				m.add(name, "", q.Stat, e.v)
				if e.only { // the estimate is only a range: say which (see boundedQuantile)
					m.add(name, "", q.Lo, e.lo)
					if !math.IsInf(e.hi, 1) {
						m.add(name, "", q.Hi, e.hi)
					}
				}
			}
		}
		if !d.noSum {
			m.add(name, "", vllm.StatMean, d.sum/d.count)
		}
	}
}

// countsFinite reports whether a histogram's count and bucket counts are all finite.
func countsFinite(d *histAcc) bool {
	if !finite(d.count) {
		return false
	}
	for _, c := range d.counts {
		if !finite(c) {
			return false
		}
	}
	return true
}
