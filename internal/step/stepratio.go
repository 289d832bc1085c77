package step

import (
	"math"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

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
