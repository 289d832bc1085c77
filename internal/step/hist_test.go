package step

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// refAdd is how increases added up before bounds were shared: the first copied, the next added
// by window.AddHist, which merges layouts by bound.
func refAdd(acc, d *window.HistDelta) *window.HistDelta {
	if acc == nil {
		return &window.HistDelta{Buckets: append([]page.Bucket(nil), d.Buckets...), Sum: d.Sum, Count: d.Count, NoSum: d.NoSum}
	}
	window.AddHist(acc, d)
	return acc
}

// sameBits reports whether an accumulator holds the reference's buckets, sum, count and flag,
// bit for bit.
func sameBits(t *testing.T, what string, got *histAcc, want *window.HistDelta) {
	t.Helper()
	bs := got.buckets()
	ok := len(bs) == len(want.Buckets) && math.Float64bits(got.sum) == math.Float64bits(want.Sum) &&
		math.Float64bits(got.count) == math.Float64bits(want.Count) && got.noSum == want.NoSum
	for i := 0; ok && i < len(bs); i++ {
		ok = math.Float64bits(bs[i].Le) == math.Float64bits(want.Buckets[i].Le) &&
			math.Float64bits(bs[i].Count) == math.Float64bits(want.Buckets[i].Count)
	}
	if !ok {
		t.Fatalf("%s: got buckets %v sum %v count %v noSum %v, want %v sum %v count %v noSum %v",
			what, bs, got.sum, got.count, got.noSum, want.Buckets, want.Sum, want.Count, want.NoSum)
	}
}

// TestHistAccAddsAsBuckets adds random increases of a few layouts (shared bounds, bounds of
// their own, none given, layouts that must be merged, sums of -0) into accumulators, per worker
// and then pooled as the close does, and checks each against the sums made on whole buckets.
func TestHistAccAddsAsBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	layouts := [][]float64{
		{0.1, 1, math.Inf(1)},
		{0.1, 0.5, 1, 5, math.Inf(1)},
		{1, math.Inf(1)},
		{0.25, 1, 2.5, math.Inf(1)},
	}
	delta := func() *window.HistDelta {
		les := layouts[rng.IntN(len(layouts))]
		if rng.IntN(3) > 0 {
			les = layouts[rng.IntN(2)] // mostly the two usual layouts
		}
		d := &window.HistDelta{Sum: float64(rng.IntN(100)) / 8, NoSum: rng.IntN(20) == 0}
		if rng.IntN(10) == 0 {
			d.Sum = math.Copysign(0, -1)
		}
		c := 0.0
		for _, le := range les {
			c += float64(rng.IntN(5))
			d.Buckets = append(d.Buckets, page.Bucket{Le: le, Count: c})
		}
		d.Count = c
		switch rng.IntN(3) {
		case 0:
			d.Bounds = les // the shared slice
		case 1:
			d.Bounds = append([]float64(nil), les...) // equal bounds in another slice
		}
		return d
	}
	for range 200 {
		const workers = 4
		var accs [workers]histAcc
		var refs [workers]*window.HistDelta
		for range 1 + rng.IntN(12) {
			w := rng.IntN(workers)
			d := delta()
			refs[w] = refAdd(refs[w], d)
			accs[w].addDelta(d)
			sameBits(t, "worker", &accs[w], refs[w])
		}
		var pooled histAcc
		var ref *window.HistDelta
		for w := range workers {
			if refs[w] == nil {
				continue
			}
			ref = refAdd(ref, refs[w])
			pooled.add(&accs[w])
			sameBits(t, "pool", &pooled, ref)
		}
	}
}

// TestStepSharesBounds checks that the open step's workers of one layout keep one slice of
// bucket bounds between them, and counts of their own.
func TestStepSharesBounds(t *testing.T) {
	f := newMemFleet(t, 3)
	tr := NewTracker(Options{Scalars: true, NoTimeline: true})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for range 3 {
		now = now.Add(500 * time.Millisecond)
		for i := range 3 {
			tr.Observe(now, f.urls[i], f.next(i), nil)
		}
	}
	var first *histAcc
	n := 0
	for _, wa := range tr.open.workers {
		h := wa.hists[vllm.TTFT]
		if h == nil || len(h.counts) == 0 {
			continue
		}
		n++
		if first == nil {
			first = h
			continue
		}
		if &h.bounds[0] != &first.bounds[0] {
			t.Error("two workers' TTFT increases keep two copies of one layout's bounds")
		}
		if &h.counts[0] == &first.counts[0] {
			t.Fatal("two workers share their counts")
		}
	}
	if n < 2 {
		t.Fatalf("%d workers with TTFT increases, want at least 2", n)
	}
}
