package step

import (
	"cmp"
	"slices"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A fleet may mix engine kinds (vLLM and SGLang), whose keys mean different things: the fleet's
// keys are computed per kind, over that kind's workers, and keyed under its prefix.

// kindPool is the workers of one engine kind, by their index among a step's workers.
type kindPool struct {
	kind vllm.Engine
	idx  []int // nil for all of them
}

// poolsByKind splits a step's workers by engine kind, in the order of the kinds; a step whose
// workers are of one kind has one pool of them all.
func poolsByKind(was []*workerAcc) []kindPool {
	var ps []kindPool
	for _, wa := range was {
		if !slices.ContainsFunc(ps, func(p kindPool) bool { return p.kind == wa.kind }) {
			ps = append(ps, kindPool{kind: wa.kind})
		}
	}
	if len(ps) <= 1 {
		return ps
	}
	slices.SortFunc(ps, func(a, b kindPool) int { return cmp.Compare(a.kind, b.kind) })
	for i := range ps {
		for j, wa := range was {
			if wa.kind == ps[i].kind {
				ps[i].idx = append(ps[i].idx, j)
			}
		}
	}
	return ps
}

// of returns the pool's workers among was.
func (p kindPool) of(was []*workerAcc) []*workerAcc {
	if p.idx == nil {
		return was
	}
	out := make([]*workerAcc, len(p.idx))
	for j, i := range p.idx {
		out[j] = was[i]
	}
	return out
}

// each calls f with the index of each of the pool's workers among n.
func (p kindPool) each(n int, f func(i int)) {
	if p.idx == nil {
		for i := range n {
			f(i)
		}
		return
	}
	for _, i := range p.idx {
		f(i)
	}
}

// tag marks vs as values of the pool's engine kind, and returns them.
func (p kindPool) tag(vs []vllm.Value) []vllm.Value {
	if p.kind != vllm.VLLM {
		for i := range vs {
			vs[i].Kind = p.kind
		}
	}
	return vs
}
