package timeline

import (
	"math"

	"github.com/vllmstat/vllmstat/internal/step"
)

// Resample spreads a series over len(out) equal columns covering [0, durS] seconds and writes
// each column's time-weighted mean to out. A sample stands for the interval since the previous
// sample (the first one since the step start), so a column between two samples takes the later
// one's value, and a column holding several samples takes their average weighted by how long
// each held. Columns after the last sample hold NaN. ps must be sorted by offset.
func Resample(out []float64, ps []step.Point, durS float64) {
	n := len(out)
	for c := range out {
		out[c] = 0
	}
	if n == 0 {
		return
	}
	if len(ps) == 0 || !(durS > 0) {
		for c := range out {
			out[c] = math.NaN()
		}
		return
	}
	width := durS / float64(n)
	prev := 0.0
	for _, p := range ps {
		b := min(max(p.OffsetS, 0), durS)
		a := prev
		prev = max(prev, b)
		if !(b > a) || math.IsNaN(p.Value) {
			continue
		}
		first := min(int(a/width), n-1)
		last := min(int(b/width), n-1)
		for c := first; c <= last; c++ {
			lo, hi := max(a, float64(c)*width), min(b, float64(c+1)*width)
			if hi > lo {
				out[c] += p.Value * (hi - lo)
			}
		}
	}
	// The covered part of each column is [0, prev]; divide by it.
	for c := range out {
		lo, hi := float64(c)*width, min(prev, float64(c+1)*width)
		if hi > lo {
			out[c] /= hi - lo
		} else {
			out[c] = math.NaN()
		}
	}
	// A sample that held for no time (an offset equal to the previous one, e.g. at the very
	// start) still shows when nothing else covers its column.
	for _, p := range ps {
		if p.OffsetS < 0 || p.OffsetS > durS || math.IsNaN(p.Value) {
			continue
		}
		// A sample on a column boundary belongs to the column it ends.
		if c := min(max(int(math.Ceil(p.OffsetS/width))-1, 0), n-1); math.IsNaN(out[c]) {
			out[c] = p.Value
		}
	}
}
