package step

import (
	"math"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The ratio keys of a step (vllm.Ratios: "prefix_cache_hit_rate",
// "spec_decode_acceptance_rate", ...): one counter's increase over another's, summed over the
// pool's workers, and for a split numerator one key per value of its label
// ("spec_decode_acceptance_rate_per_pos"). An interval's ratios (Interval, the per-interval
// statistics) are the same quotient of one scrape's increases.

// ratioKeys adds the ratios over the pool's totals s, leaving out a ratio whose counters
// contradict each other (see stepQuotient) and, for one that must be paired, a pool where a
// worker has the numerator without the denominator.
func (m *poolKeys) ratioKeys(s *poolTotals, was []*workerAcc) {
	for _, rt := range vllm.Ratios {
		if rt.Paired && !paired(was, rt) {
			continue
		}
		if v, ok := stepRatio(rt, &s.totals, &s.has); ok {
			m.add(rt.Name, "", "", v)
		}
		if vllm.Counters[rt.Num].Split != "" {
			for r, v := range s.split[rt.Num] {
				if q, ok := stepQuotient(rt, v, s.totals[rt.Den]); ok {
					m.add(rt.Name, r, "", q)
				}
			}
		}
	}
}

// paired reports whether every worker of a pool that has rt's numerator on its page has its
// denominator too (see vllm.Ratio.Paired).
func paired(was []*workerAcc, rt vllm.Ratio) bool {
	for _, wa := range was {
		if wa.has[rt.Num] && !wa.has[rt.Den] {
			return false
		}
	}
	return true
}

// ratio computes rt from counter increases: absent when its numerator is not on the page or
// its denominator did not move.
func ratio(rt vllm.Ratio, totals *[vllm.NumCounters]float64, has *[vllm.NumCounters]bool) (float64, bool) {
	if !has[rt.Num] || vllm.Counters[rt.Num].Split != "" {
		return 0, false
	}
	return quotient(rt, totals[rt.Num], totals[rt.Den])
}

// quotient is rt of a numerator and a denominator, absent when the denominator did not move.
// When either is beyond the float limit (not finite) the ratio had a basis but has no value: it
// is NaN, and so is every statistic over it; a quotient beyond the limit is ±Inf. Callers keep
// only finite values as keys.
func quotient(rt vllm.Ratio, num, den float64) (float64, bool) {
	switch {
	case den <= 0:
		return 0, false
	case !finite(num) || !finite(den):
		return math.NaN(), true
	}
	return rt.Offset + num/den, true
}
