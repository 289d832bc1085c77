package step

import (
	"math"
	"slices"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// metrics computes the step's values over a pool of workers (all of them, or one), as package
// vllm describes them, in no particular order.
func (t *Tracker) metrics(was []*workerAcc, durS float64) []vllm.Value {
	var m []vllm.Value
	add := func(name, label, stat string, v float64) {
		m = append(m, vllm.Value{Name: name, Label: label, Stat: stat, V: v})
	}
	var totals [vllm.NumCounters]float64
	var has [vllm.NumCounters]bool
	var split [vllm.NumCounters]map[string]float64
	var hists [vllm.NumHists]*histAcc
	for _, wa := range was {
		for c := range totals {
			if wa.has[c] {
				has[c] = true
				totals[c] += wa.totals[c]
			}
		}
		for sl, m := range wa.splitCols {
			c := slotCounter[sl]
			for r, v := range m {
				if split[c] == nil {
					split[c] = map[string]float64{}
				}
				split[c][r] += v
			}
		}
		for h, d := range wa.hists {
			if d != nil {
				if hists[h] == nil {
					hists[h] = &histAcc{}
				}
				hists[h].add(d)
			}
		}
	}
	for c, f := range vllm.Counters {
		switch {
		case !f.Total:
		case f.Split != "":
			for r, v := range split[c] {
				add(f.Name, r, "", v)
			}
		case has[c]:
			add(f.Name, "", "", totals[c])
		}
	}
	for _, sm := range vllm.Sums {
		var v float64
		var any bool
		for _, c := range sm.Of {
			if has[c] {
				v, any = v+totals[c], true
			}
		}
		if any {
			add(sm.Name, "", "", v)
		}
	}
	for _, pt := range vllm.LabelParts {
		if !has[pt.Of] || pt.AddsUp && !partsCover(was, pt) {
			continue
		}
		var v float64
		for _, val := range pt.Values {
			v += split[pt.Of][val]
		}
		switch {
		case !pt.Share:
			add(pt.Name, "", "", v)
		case totals[pt.Of] > 0 && finite(v) && finite(totals[pt.Of]):
			add(pt.Name, "", "", v/totals[pt.Of])
		}
	}
	for _, u := range vllm.Unfinisheds {
		if v, ok := unfinished(was, u); ok {
			add(u.Name, "", "", v)
		}
	}
	for _, sr := range vllm.SumRatios {
		if v, ok := sumRatio(was, sr); ok {
			add(sr.Name, "", "", v)
		}
	}
	for _, rt := range vllm.Ratios {
		if rt.Paired && !paired(was, rt) {
			continue
		}
		if v, ok := stepRatio(rt, &totals, &has); ok {
			add(rt.Name, "", "", v)
		}
		if vllm.Counters[rt.Num].Split != "" {
			for r, v := range split[rt.Num] {
				if q, ok := stepQuotient(rt, v, totals[rt.Den]); ok {
					add(rt.Name, r, "", q)
				}
			}
		}
	}
	if durS > 0 {
		for _, rt := range vllm.Rates {
			if has[rt.Of] {
				add(rt.Name(), "", "", totals[rt.Of]/durS)
			}
		}
	}
	if t.opt.Scalars {
		var buf []float64 // one pool's samples at a time
		for g, f := range vllm.Gauges[:vllm.NumKeyedGauges] {
			switch {
			case !f.Scalars:
			case f.Split != "":
				values := map[string]bool{}
				for _, wa := range was {
					for v := range wa.splitGaugeOf(vllm.Gauge(g)) {
						values[v] = true
					}
				}
				for v := range values {
					pool(add, f.Name, v, was, &buf, func(wa *workerAcc, xs []float64) []float64 {
						if c := wa.splitGaugeOf(vllm.Gauge(g))[v]; c != nil {
							return c.appendTo(xs)
						}
						return xs
					})
				}
			default:
				pool(add, f.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 { return wa.gauges[g].v.appendTo(xs) })
			}
		}
		for i, rt := range vllm.Ratios {
			if rt.Scalars {
				pool(add, rt.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 {
					if wa.ratioOver(i) {
						return xs // its intervals are no figures either (see ratioover.go)
					}
					return wa.appendRatios(i, rt.Fraction, xs)
				})
			}
		}
		for c, f := range vllm.Counters {
			if f.Scalars {
				pool(add, f.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 { return wa.delta(vllm.Counter(c)).v.appendTo(xs) })
			}
		}
	}
	for h, d := range hists {
		if d == nil || d.count <= 0 || !countsFinite(d) {
			continue // no observations, or more than a float holds: no quantile can be told
		}
		name := vllm.Hists[h].Name
		buckets, ok := sortedBuckets(d.buckets())
		for _, q := range vllm.HistQuantiles {
			if !ok {
				break
			}
			if e, ok := boundedQuantile(q.Q, buckets, d.sum, !d.noSum); ok {
				add(name, "", q.Stat, e.v)
				if e.only { // the estimate is only a range: say which (see boundedQuantile)
					add(name, "", q.Lo, e.lo)
					if !math.IsInf(e.hi, 1) {
						add(name, "", q.Hi, e.hi)
					}
				}
			}
		}
		if !d.noSum {
			add(name, "", vllm.StatMean, d.sum/d.count)
		}
	}
	// Trackers take finite numbers only. A sum beyond the float limit stays infinite (or NaN)
	// through every sum, rate and mean computed from it, so the keys that depend on it go here.
	return slices.DeleteFunc(m, func(v vllm.Value) bool { return !finite(v.V) })
}

// partsCover reports whether the parts of pt over a pool add up to the pool's whole
// (vllm.Part.Whole): every worker that counts the whole counts the parts too. A fleet with an
// engine older than the split family would otherwise get parts of some engines' whole.
func partsCover(was []*workerAcc, pt vllm.Part) bool {
	for _, wa := range was {
		if wa.has[pt.Whole] && !wa.has[pt.Of] {
			return false
		}
	}
	return true
}

// finite reports whether v is a number a float holds: not NaN, not ±Inf. A counter's increase
// or a sum of them that is not finite went beyond the float limit, and nothing computed from
// it is a value.
func finite(v float64) bool { return v-v == 0 }
