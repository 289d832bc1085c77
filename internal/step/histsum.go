package step

import (
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The keys that a histogram's sum gives exactly, where the step's requests allow:
// vllm.Unfinisheds ("aborted_prompt_tokens": a counter's increase less a histogram's sum) and
// vllm.SumRatios ("max_tokens_used_fraction": one histogram's sum over another's).

// histSumKeys adds the pool's unfinished counts and sum ratios.
func (m *poolKeys) histSumKeys(was []*workerAcc) {
	for _, u := range vllm.Unfinisheds {
		if v, ok := unfinished(was, u); ok {
			m.add(u.Name, "", "", v)
		}
	}
	for _, sr := range vllm.SumRatios {
		if v, ok := sumRatio(was, sr); ok {
			m.add(sr.Name, "", "", v)
		}
	}
}

// unfinished is u over a pool of workers: each vLLM worker's increase of u's counter less that of
// its histogram's sum. A request in flight at either end of the step could have been counted in
// one and not the other (prefilled in the step before, finished in this one; prefilled in
// this one, finishing in the next), so the value is given only when every vLLM worker with
// the counter showed no request running or waiting on its page before the step and on its
// last page of it: every request it counted in the step then both started and ended in it, and
// those that did not finish are the difference, exactly. ok is false otherwise, and when no
// worker has the counter.
func unfinished(was []*workerAcc, u vllm.Unfinished) (float64, bool) {
	var v float64
	var any bool
	for _, wa := range was {
		if wa.kind != vllm.VLLM || !wa.has[u.Of] {
			continue
		}
		h := wa.hists[u.Less]
		if !wa.ends.set || wa.ends.start || wa.ends.end || h == nil || h.noSum {
			return 0, false
		}
		d := wa.totals[u.Of] - h.sum
		if !(d >= 0) { // a page whose counter and histogram disagree: nothing exact to give
			return 0, false
		}
		v, any = v+d, true
	}
	return v, any
}

// sumRatio is sr over a pool of workers: the increases of its histograms' sums, each summed over
// the workers, divided. Each worker with either histogram must have both, with sums, and equal
// count increases (vLLM leaves a request that set no max_tokens out of request_params_max_tokens
// only), so that the two sums are of the same requests; ok is false otherwise, and when the
// denominator did not rise.
func sumRatio(was []*workerAcc, sr vllm.SumRatio) (float64, bool) {
	var num, den float64
	for _, wa := range was {
		n, d := wa.hists[sr.Num], wa.hists[sr.Den]
		if n == nil && d == nil {
			continue
		}
		if n == nil || d == nil || n.noSum || d.noSum || n.count != d.count {
			return 0, false
		}
		num, den = num+n.sum, den+d.sum
	}
	if !(den > 0) || !finite(num) || !finite(den) {
		return 0, false
	}
	return num / den, true
}
