package step

import (
	"maps"
	"math"
	"slices"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A ratio of two counts (vllm.Ratio.Fraction: a hit rate, an acceptance rate) never has its
// numerator above its denominator. Over a step it can come out above 1 all the same: counters
// that contradict each other (cached tokens counted twice, say), or one counter's increase that
// landed at a later scrape than the other's (a series NaN or missing for a while, whose
// increase then holds what the step before should have had). Neither is a figure of the step:
// the key is left out, and the record names the worker's target (Record.RatiosOver). The
// counts themselves stay in the record. The per-interval values (/mean, /max, /p95) leave out
// every value above 1 the same way (one interval's two counters may be read between the
// increments of one request), and all of a worker's values when its step ratio is left out.

// RatioOver names a target one of whose workers had, over a step, the numerator of a ratio of
// two counts above its denominator: the ratio's key is left out of the record (of the worker's,
// and of the fleet's when the fleet's sums are over too).
type RatioOver struct {
	Target string
	// Ratio, Num and Den are the keys of the ratio and of its two counters under the run's
	// metric prefix; NumV and DenV are the counters' increases over the step.
	Ratio, Num, Den string
	NumV, DenV      float64
}

// over reports whether a step's num and den of rt contradict each other: rt is a ratio of two
// counts and num is above den.
func over(rt vllm.Ratio, num, den float64) bool {
	return rt.Fraction && num > den
}

// stepQuotient is quotient over a step's totals: NaN, a basis but no value, where the
// counters contradict each other (see over).
func stepQuotient(rt vllm.Ratio, num, den float64) (float64, bool) {
	v, ok := quotient(rt, num, den)
	if ok && over(rt, num, den) {
		v = math.NaN()
	}
	return v, ok
}

// stepRatio is ratio over a step's totals, as stepQuotient.
func stepRatio(rt vllm.Ratio, totals *[vllm.NumCounters]float64, has *[vllm.NumCounters]bool) (float64, bool) {
	v, ok := ratio(rt, totals, has)
	if ok && over(rt, totals[rt.Num], totals[rt.Den]) {
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
	return wa.has[rt.Num] && over(rt, wa.totals[rt.Num], wa.totals[rt.Den])
}

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
		if !rt.Fraction || !wa.has[rt.Num] {
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
