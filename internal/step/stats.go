package step

import (
	"math"
	"sort"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// HistogramQuantile estimates the q-quantile from cumulative buckets the way Prometheus'
// histogram_quantile does: buckets sorted by bound, the last one must be +Inf, the count is
// made monotonic, the rank q*total falls in the first bucket whose count reaches it, and the
// value is interpolated linearly inside it (from 0 for the first bucket when its bound is
// positive). A rank in the +Inf bucket gives the highest finite bound. ok is false when the
// estimate does not exist (no +Inf bucket, fewer than two buckets, no observations).
func HistogramQuantile(q float64, in []page.Bucket) (v float64, ok bool) {
	if len(in) < 2 || math.IsNaN(q) {
		return 0, false
	}
	bs := append([]page.Bucket(nil), in...)
	sort.Slice(bs, func(i, j int) bool { return bs[i].Le < bs[j].Le })
	if !math.IsInf(bs[len(bs)-1].Le, 1) {
		return 0, false
	}
	max := math.Inf(-1)
	for i := range bs {
		if bs[i].Count < max {
			bs[i].Count = max
		}
		max = bs[i].Count
	}
	total := bs[len(bs)-1].Count
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	b := sort.Search(len(bs)-1, func(i int) bool { return bs[i].Count >= rank })
	if b == len(bs)-1 {
		return bs[len(bs)-2].Le, true
	}
	if b == 0 && bs[0].Le <= 0 {
		return bs[0].Le, true
	}
	start, end, count := 0.0, bs[b].Le, bs[b].Count
	if b > 0 {
		start = bs[b-1].Le
		count -= bs[b-1].Count
		rank -= bs[b-1].Count
	}
	return start + (end-start)*(rank/count), true
}

// Percentile is numpy's default percentile (linear interpolation between the closest ranks) of
// xs for q in [0, 1]. xs is sorted in place. ok is false for no samples.
func Percentile(xs []float64, q float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	sort.Float64s(xs)
	h := float64(len(xs)-1) * q
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(xs) {
		return xs[len(xs)-1], true
	}
	return xs[i] + (h-lo)*(xs[i+1]-xs[i]), true
}

// summary holds mean, max and p95 of a pool of samples.
type summary struct {
	mean, max, p95 float64
}

// of returns the statistic named st (one of vllm.IntervalStats).
func (s summary) of(st string) float64 {
	switch st {
	case vllm.StatMean:
		return s.mean
	case vllm.StatMax:
		return s.max
	case vllm.StatP95:
		return s.p95
	}
	panic("step: no interval statistic " + st)
}

func summarize(xs []float64) (summary, bool) {
	if len(xs) == 0 {
		return summary{}, false
	}
	s := summary{max: math.Inf(-1)}
	var sum float64
	for _, x := range xs {
		if !finite(x) {
			return summary{}, false // a sample beyond the float limit: no statistic of the pool is a value
		}
		sum += x
		if x > s.max {
			s.max = x
		}
	}
	s.mean = sum / float64(len(xs))
	s.p95, _ = percentileOf(xs, 0.95)
	return s, true
}
