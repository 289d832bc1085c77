package step

import (
	"math"
	"math/bits"
	"slices"
)

// percentileOf is Percentile without sorting: it moves the two closest ranks into place by
// selection (on average linear in len(xs), against sorting's n log n) and leaves xs in no
// particular order. A fleet's step pools tens of thousands of per-interval samples for each
// gauge, and sorting them all was a third of closing its step, which the trainer waits for.
// xs must not hold NaN; ok is false for no samples.
func percentileOf(xs []float64, q float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	h := float64(len(xs)-1) * q
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(xs) {
		return slices.Max(xs), true
	}
	nth(xs, i)
	next := slices.Min(xs[i+1:])
	return xs[i] + (h-lo)*(next-xs[i]), true
}

// nth reorders xs so that xs[k] is the value sorting would put there, nothing before it is
// greater and nothing after it is smaller (quickselect; a range that keeps splitting badly is
// sorted instead, which bounds the work by n log n whatever the values).
func nth(xs []float64, k int) {
	lo, hi := 0, len(xs)-1
	budget := 2*bits.Len(uint(len(xs))) + 4
	for hi > lo {
		if budget--; budget < 0 || hi-lo < 16 {
			slices.Sort(xs[lo : hi+1])
			return
		}
		p := pivot(xs[lo], xs[lo+(hi-lo)/2], xs[hi])
		// Hoare's partition: xs[lo..j] <= p <= xs[j+1..hi] afterwards.
		i, j := lo-1, hi+1
		for {
			for i++; xs[i] < p; i++ {
			}
			for j--; xs[j] > p; j-- {
			}
			if i >= j {
				break
			}
			xs[i], xs[j] = xs[j], xs[i]
		}
		if k <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
}

// pivot is the median of three values.
func pivot(a, b, c float64) float64 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}
