package step

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A pool's keys (the whole fleet's of one engine kind, or one worker's) are computed from the
// workers' shares of the step, family by family, each family in a file of its own:
//   - this file: the counters' totals ("prompt_tokens", "request_success" by finished_reason),
//     their sums (vllm.Sums: "finished_requests", "recomputed_tokens"), the parts of split
//     counters (vllm.LabelParts: "truncated_fraction", "prompt_tokens_cached", ...) and the
//     per-second rates (vllm.Rates: "generation_tokens_per_s", ...);
//   - histsum.go: what histograms' sums give exactly (vllm.Unfinisheds:
//     "aborted_prompt_tokens"; vllm.SumRatios: "max_tokens_used_fraction");
//   - stepratio.go: the ratios of counters over the step (vllm.Ratios:
//     "prefix_cache_hit_rate", "spec_decode_acceptance_rate", ...);
//   - scalars.go: the mean/max/p95 of the per-interval samples ("num_requests_running/p95",
//     "prefix_cache_hit_rate/mean", "num_preemptions/max", ...);
//   - quantile.go: the histograms' quantiles and means ("time_to_first_token_seconds/p95", ...).
// The time ledger's, compute and balance keys have files of their own too (ledger.go,
// compute.go, balance.go); fill (endstep.go) gathers them all.

// metrics computes the step's values over a pool of workers (all of them, or one), as package
// vllm describes them, in no particular order.
func (t *Tracker) metrics(was []*workerAcc, durS float64) []vllm.Value {
	var m poolKeys
	var s poolTotals
	s.addWorkers(was)
	m.totalKeys(&s, was)
	m.histSumKeys(was)
	m.ratioKeys(&s, was)
	m.rateKeys(&s, durS)
	if t.opt.Scalars {
		m.scalarKeys(was)
	}
	m.quantileKeys(&s)
	// Trackers take finite numbers only. A sum beyond the float limit stays infinite (or NaN)
	// through every sum, rate and mean computed from it, so the keys that depend on it go here.
	return slices.DeleteFunc(m, func(v vllm.Value) bool { return !finite(v.V) })
}

// poolKeys are a pool's keys as they are computed.
type poolKeys []vllm.Value

func (m *poolKeys) add(name, label, stat string, v float64) {
	*m = append(*m, vllm.Value{Name: name, Label: label, Stat: stat, V: v})
}

// poolTotals are a pool's counter increases, their splits by label and its histograms, each
// added up over the pool's workers: what the totals, ratios, rates and quantiles are of.
type poolTotals struct {
	totals [vllm.NumCounters]float64
	has    [vllm.NumCounters]bool
	split  [vllm.NumCounters]map[string]float64
	hists  [vllm.NumHists]*histAcc
}

// addWorkers adds up the shares of the step of the workers was.
func (s *poolTotals) addWorkers(was []*workerAcc) {
	for _, wa := range was {
		for c := range s.totals {
			if wa.has[c] {
				s.has[c] = true
				s.totals[c] += wa.totals[c]
			}
		}
		for sl, m := range wa.splitCols {
			c := slotCounter[sl]
			for r, v := range m {
				if s.split[c] == nil {
					s.split[c] = map[string]float64{}
				}
				s.split[c][r] += v
			}
		}
		for h, d := range wa.hists {
			if d != nil {
				if s.hists[h] == nil {
					s.hists[h] = &histAcc{}
				}
				s.hists[h].add(d)
			}
		}
	}
}

// totalKeys adds the counters' totals (by the split label's value for a split counter), the
// sums of counters and the parts of split counters.
func (m *poolKeys) totalKeys(s *poolTotals, was []*workerAcc) {
	for c, f := range vllm.Counters {
		switch {
		case !f.Total:
		case f.Split != "":
			for r, v := range s.split[c] {
				m.add(f.Name, r, "", v)
			}
		case s.has[c]:
			m.add(f.Name, "", "", s.totals[c])
		}
	}
	for _, sm := range vllm.Sums {
		var v float64
		var any bool
		for _, c := range sm.Of {
			if s.has[c] {
				v, any = v+s.totals[c], true
			}
		}
		if any {
			m.add(sm.Name, "", "", v)
		}
	}
	for _, pt := range vllm.LabelParts {
		if !s.has[pt.Of] || pt.AddsUp && !partsCover(was, pt) {
			continue
		}
		var v float64
		for _, val := range pt.Values {
			v += s.split[pt.Of][val]
		}
		switch {
		case !pt.Share:
			m.add(pt.Name, "", "", v)
		case s.totals[pt.Of] > 0 && finite(v) && finite(s.totals[pt.Of]):
			m.add(pt.Name, "", "", v/s.totals[pt.Of])
		}
	}
}

// rateKeys adds the counters' per-second rates over durS seconds; none for a step of no time.
func (m *poolKeys) rateKeys(s *poolTotals, durS float64) {
	if durS > 0 {
		for _, rt := range vllm.Rates {
			if s.has[rt.Of] {
				m.add(rt.Name(), "", "", s.totals[rt.Of]/durS)
			}
		}
	}
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
