package step

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// A worker's per-interval ratio (an interval's prefix-cache hit rate) is one counter's increase
// over another's, and an open step that keeps the ratio keeps both increases anyway. While the
// two counters come at the same scrapes, as they do on any page that has both, the ratio's
// values are computed from their columns, with the same operations as at the scrape, whenever a
// record needs them, and take no room. Should one come without the other, the values so far
// are computed and kept then, and so are those that follow.

// ratioSeries is a worker's per-interval values of one ratio.
type ratioSeries struct {
	kept   bool // the values are in series; else computed from the counters' columns
	series      // the values once kept
}

// derivable says whether ratio rt's values can be computed from the columns that keep asks
// for, with its times when timed.
func derivable(k *keep, rt vllm.Ratio, timed bool) bool {
	return vllm.Counters[rt.Num].Split == "" && k.counters[rt.Num] && k.counters[rt.Den] &&
		(!timed || k.timedCounters[rt.Num])
}

// observeRatios adds the ratios of one scrape's increases.
func (wa *workerAcc) observeRatios(k *keep, at time.Duration, inc *window.Increase) {
	for i, rt := range vllm.Ratios {
		if !k.ratios[i] {
			continue
		}
		if wa.ratioCols == nil {
			wa.ratioCols = make([]ratioSeries, numRatioSlots)
			for j, sl := range ratioSlot {
				if sl >= 0 {
					wa.ratioCols[sl].kept = !k.derivedRatios[j]
				}
			}
		}
		rs := &wa.ratioCols[ratioSlot[i]]
		if !rs.kept {
			if inc.HasCounter[rt.Num] == inc.HasCounter[rt.Den] {
				continue
			}
			wa.keepRatio(i, k.timedRatios[i])
		}
		if v, ok := ratio(rt, &inc.Counters, &inc.HasCounter); ok {
			rs.add(at, v, k.timedRatios[i])
		}
	}
}

// keepRatio computes ratio i's values so far, from the scrapes where both counters came, and
// keeps them and those that follow.
func (wa *workerAcc) keepRatio(i int, timed bool) {
	rs := &wa.ratioCols[ratioSlot[i]]
	var s series
	wa.eachRatio(i, func(at int64, v float64) { s.add(time.Duration(at), v, timed) })
	rs.series, rs.kept = s, true
}

// appendRatios appends ratio i's values in scrape order to xs, and returns it.
func (wa *workerAcc) appendRatios(i int, fraction bool, xs []float64) []float64 {
	wa.eachRatio(i, func(_ int64, v float64) {
		if !(fraction && v > 1) { // no figure (see ratioover.go)
			xs = append(xs, v)
		}
	})
	return xs
}

// eachRatio calls f with each of ratio i's values in scrape order, and its time since the step
// start (0 when no timeline shows it).
func (wa *workerAcc) eachRatio(i int, f func(at int64, v float64)) {
	if wa.ratioCols == nil || ratioSlot[i] < 0 {
		return
	}
	rs := &wa.ratioCols[ratioSlot[i]]
	if rs.kept {
		vr, ar := rs.v.reader(), rs.at.reader()
		timed := rs.at.len() > 0
		for range rs.v.len() {
			var at int64
			if timed {
				at = ar.next()
			}
			f(at, vr.next())
		}
		return
	}
	rt := vllm.Ratios[i]
	num, den := wa.delta(rt.Num), wa.delta(rt.Den)
	nr, dr, ar := num.v.reader(), den.v.reader(), num.at.reader()
	timed := num.at.len() > 0
	// Until now both came at every scrape; the longer one may hold this scrape's value, which
	// the caller deals with.
	for range min(num.v.len(), den.v.len()) {
		var at int64
		if timed {
			at = ar.next()
		}
		if v, ok := quotient(rt, nr.next(), dr.next()); ok {
			f(at, v)
		}
	}
}
