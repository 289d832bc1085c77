package step

import (
	"maps"
	"math"
	"slices"

	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// A ratio of two counts (vllm.Ratio.Fraction: a hit rate, an acceptance rate) never has its
// numerator above its denominator, and over a step whose two counters moved at the same scrapes
// it has not either, short of counters that contradict each other (cached tokens counted twice,
// say). Its key is then no figure: it is left out, and the record names the worker's target
// (Record.RatiosOver). One counter may move without the other at a scrape, though: the increase
// of a NaN or missing series lands at a later scrape, perhaps in the next step, whose numerator
// may then pass its denominator by what moved apart. Such a step keeps the ratio as it is, and
// so do one interval's values, which a scrape between the two counters' increments for one
// request can put above 1 as well.

// RatioOver names a target one of whose workers had, over a step, the numerator of a ratio of
// two counts above its denominator, the two having moved at the same scrapes: the ratio's key
// is left out of the record (of the worker's, and of the fleet's when the fleet's sums are
// over too).
type RatioOver struct {
	Target string
	// Ratio, Num and Den are the keys of the ratio and of its two counters under the run's
	// metric prefix; NumV and DenV are the counters' increases over the step.
	Ratio, Num, Den string
	NumV, DenV      float64
}

// apart returns the ratios of two counts (as bits of their index in vllm.Ratios) whose counters
// moved apart at one scrape of a worker: one had an increase and the other none, or they had
// one together for the first time since, the later one holding what moved apart. lag keeps
// the worker's ratios whose counters last moved apart.
func apart(inc *window.Increase, lag *uint32) uint32 {
	var out uint32
	for i, rt := range vllm.Ratios {
		if !rt.Fraction {
			continue
		}
		bit := uint32(1) << i
		n, d := inc.HasCounter[rt.Num], inc.HasCounter[rt.Den]
		switch {
		case n != d:
			out |= bit
			*lag |= bit
		case n && *lag&bit != 0:
			out |= bit
			*lag &^= bit
		}
	}
	return out
}

// over reports whether a step's num and den of rt contradict each other: rt is a ratio of two
// counts, its counters moved together in the step, and num is above den.
func over(rt vllm.Ratio, together bool, num, den float64) bool {
	return rt.Fraction && together && num > den
}

// stepQuotient is quotient over a step's totals: NaN, a basis but no value, where the
// counters contradict each other (see over).
func stepQuotient(rt vllm.Ratio, together bool, num, den float64) (float64, bool) {
	v, ok := quotient(rt, num, den)
	if ok && over(rt, together, num, den) {
		v = math.NaN()
	}
	return v, ok
}

// stepRatio is ratio over a step's totals, as stepQuotient.
func stepRatio(rt vllm.Ratio, together bool, totals *[vllm.NumCounters]float64, has *[vllm.NumCounters]bool) (float64, bool) {
	v, ok := ratio(rt, totals, has)
	if ok && over(rt, together, totals[rt.Num], totals[rt.Den]) {
		v = math.NaN()
	}
	return v, ok
}

// ratioOver reports whether the worker's step has ratio i's counters contradict each other
// (see over). Its per-interval values are then no figures either: they came from the same
// counters at the same scrapes, and the statistics over them (/mean, /max, /p95) leave them
// out, of the worker's record and of the fleet's.
func (wa *workerAcc) ratioOver(i int) bool {
	rt := vllm.Ratios[i]
	return wa.has[rt.Num] && over(rt, wa.together(i), wa.totals[rt.Num], wa.totals[rt.Den])
}

// ratioIndex is the index of rt in vllm.Ratios, -1 when it is none of them.
func ratioIndex(rt vllm.Ratio) int {
	return slices.IndexFunc(vllm.Ratios, func(r vllm.Ratio) bool { return r.Name == rt.Name && r.Num == rt.Num && r.Den == rt.Den })
}

// together reports whether ratio i's counters moved together over the step of workers was.
func together(was []*workerAcc, i int) bool {
	for _, wa := range was {
		if !wa.together(i) {
			return false
		}
	}
	return true
}

// together reports whether ratio i's counters moved together over the worker's step.
func (wa *workerAcc) together(i int) bool { return wa.apart&(1<<i) == 0 }

// ratiosOver lists the targets of a's workers whose counters of a ratio contradict each other
// over the step (see RatioOver), each once: its first such worker and ratio, in worker order.
// Such workers are rare: the workers are not sorted, only those found (a fleet's step end
// sorted its thousands of workers a second time for none).
func (t *Tracker) ratiosOver(a *acc) []RatioOver {
	type found struct {
		id WorkerID
		wa *workerAcc
		o  over1
	}
	var fs []found
	for id, wa := range a.workers {
		if wa.scrapes > 0 {
			if o, ok := wa.firstRatioOver(); ok {
				fs = append(fs, found{id, wa, o})
			}
		}
	}
	if len(fs) == 0 {
		return nil
	}
	slices.SortFunc(fs, func(a, b found) int { return a.id.Compare(b.id) })
	var out []RatioOver
	for _, f := range fs {
		if len(out) > 0 && out[len(out)-1].Target == f.id.Target {
			continue
		}
		rt := vllm.Ratios[f.o.i]
		key := func(name, label string) string {
			return vllm.Value{Name: name, Label: label, Kind: f.wa.kind}.Key(t.opt.Prefix)
		}
		out = append(out, RatioOver{Target: f.id.Target, Ratio: key(rt.Name, f.o.label), Num: key(vllm.Counters[rt.Num].Name, f.o.label),
			Den: key(vllm.Counters[rt.Den].Name, ""), NumV: f.o.num, DenV: f.o.den})
	}
	return out
}

// over1 is a worker's ratio over its step: the index of the ratio in vllm.Ratios, the split
// label's value of its numerator ("" when it has none), and the two increases.
type over1 struct {
	i        int
	label    string
	num, den float64
}

// firstRatioOver returns the worker's first ratio of two counts whose counters contradict each
// other over the step.
func (wa *workerAcc) firstRatioOver() (over1, bool) {
	for i, rt := range vllm.Ratios {
		if !rt.Fraction || !wa.has[rt.Num] || !wa.together(i) {
			continue
		}
		den := wa.totals[rt.Den]
		label, num := "", wa.totals[rt.Num]
		if vllm.Counters[rt.Num].Split != "" {
			num = math.Inf(-1)
			sp := wa.splitOf(rt.Num)
			for _, v := range slices.Sorted(maps.Keys(sp)) {
				if x := sp[v]; x > den {
					label, num = v, x
					break
				}
			}
		}
		if !finite(num) || !finite(den) || den <= 0 || num <= den {
			continue
		}
		return over1{i, label, num, den}, true
	}
	return over1{}, false
}
