package step

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/window"
)

// histAcc is a histogram's increases added up over a step: bucket counts beside their upper
// bounds. The bounds are the window's shared slice of that layout (window.HistDelta.Bounds),
// never written here: a step of a fleet's workers kept a copy of them in each worker's
// accumulator, half of what its histograms held.
type histAcc struct {
	bounds     []float64
	counts     []float64
	sum, count float64
	noSum      bool
	has        bool // something was added
}

// addDelta adds d.
func (a *histAcc) addDelta(d *window.HistDelta) {
	bounds := d.Bounds
	if len(bounds) != len(d.Buckets) { // not set: bounds of its own
		bounds = make([]float64, len(d.Buckets))
		for i, b := range d.Buckets {
			bounds[i] = b.Le
		}
	}
	if !a.has { // the first is copied, not added to zeros: a -0 stays -0, as a copy keeps it
		*a = histAcc{bounds: bounds, counts: make([]float64, len(d.Buckets)), sum: d.Sum, count: d.Count, noSum: d.NoSum, has: true}
		for i, b := range d.Buckets {
			a.counts[i] = b.Count
		}
		return
	}
	a.sum += d.Sum
	a.count += d.Count
	a.noSum = a.noSum || d.NoSum
	if sameBounds(a.bounds, bounds) {
		for i, b := range d.Buckets {
			a.counts[i] += b.Count
		}
		return
	}
	a.merge(d.Buckets)
}

// add adds o, another accumulator (a pool's workers added up at the close).
func (a *histAcc) add(o *histAcc) {
	if !a.has {
		*a = *o
		a.counts = slices.Clone(o.counts)
		return
	}
	a.sum += o.sum
	a.count += o.count
	a.noSum = a.noSum || o.noSum
	if sameBounds(a.bounds, o.bounds) {
		for i, c := range o.counts {
			a.counts[i] += c
		}
		return
	}
	a.merge(o.buckets())
}

// merge adds buckets of another layout, by bound (window.MergeBuckets); the merged bounds are
// the accumulator's own.
func (a *histAcc) merge(bs []page.Bucket) {
	m := window.MergeBuckets(a.buckets(), bs)
	a.bounds, a.counts = make([]float64, len(m)), make([]float64, len(m))
	for i, b := range m {
		a.bounds[i], a.counts[i] = b.Le, b.Count
	}
}

// buckets returns the accumulated buckets, in a new slice.
func (a *histAcc) buckets() []page.Bucket {
	out := make([]page.Bucket, len(a.counts))
	for i, c := range a.counts {
		out[i] = page.Bucket{Le: a.bounds[i], Count: c}
	}
	return out
}

// sameBounds reports whether two layouts have the same bounds; the window's shared slices are
// usually the very same one.
func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
