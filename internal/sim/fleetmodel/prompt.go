package fleetmodel

import (
	"math"
	"math/rand/v2"

	"github.com/vllmstat/vllmstat/internal/sim/core"
)

// promptSpec is the request of one sample of p, numbered id, arriving now. Its output length is
// drawn from the workload's lognormal output distribution with a generator of its own, seeded
// from the fleet's seed and the id: the workload's generator is left alone.
func (s *Sim) promptSpec(p core.Prompt, id uint64) core.RequestSpec {
	seed := core.Mix64(id ^ uint64(s.Cfg.Seed) ^ 0x64726976656e)
	out := p.MaxTokens
	if !p.IgnoreEOS {
		w := s.Cfg.Workload
		l := float64(w.OutputMedian) * math.Exp(w.OutputSigma*rand.New(rand.NewPCG(seed, 0)).NormFloat64())
		out = int(min(max(math.Round(l), 1), float64(p.MaxTokens)))
	}
	return core.RequestSpec{ID: id, Arrival: s.Time, PromptLen: len(p.Tokens), Prompt: &p, OutputSeed: seed,
		OutputLen: out, MaxTokens: p.MaxTokens}
}
