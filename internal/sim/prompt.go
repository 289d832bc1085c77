package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
)

// Prompt is a driven request's prompt as the engines see it, and the sampling parameters that
// shape its output.
type Prompt struct {
	// Tokens are the prompt's token ids (see Tokenize).
	Tokens []uint64
	// MaxTokens bounds the output; 0 means what the model length leaves after the prompt.
	MaxTokens int
	// IgnoreEOS makes every sample generate MaxTokens tokens; otherwise each draws its length
	// from the workload's output distribution, cut at MaxTokens.
	IgnoreEOS bool
}

// Tokenize is the simulator's tokenizer: one token per whitespace-separated word of text, its id
// a hash of the word. An empty text is one token, as a real tokenizer's BOS token would be. Equal
// texts are equal token sequences, and texts that begin with the same words share that prefix,
// which the prefix cache finds block by block (BlockSize tokens).
func Tokenize(text string) []uint64 {
	words := strings.Fields(text)
	if len(words) == 0 {
		return []uint64{1}
	}
	ids := make([]uint64, len(words))
	for i, w := range words {
		h := fnv.New64a()
		h.Write([]byte(w))
		ids[i] = mix64(h.Sum64()) % vocabSize
	}
	return ids
}

// TokenIDs turns token ids a client sent into the simulator's, which stay below the vocabulary
// size; an empty list is one token, as for Tokenize.
func TokenIDs(ids []int64) []uint64 {
	if len(ids) == 0 {
		return []uint64{1}
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id) % vocabSize
	}
	return out
}

// check returns p with its default MaxTokens set, or what is wrong with it for a model of
// maxModelLen tokens.
func (p Prompt) check(maxModelLen int) (Prompt, error) {
	switch {
	case p.MaxTokens < 0:
		return p, fmt.Errorf("max_tokens must be at least 1, got %d", p.MaxTokens)
	case len(p.Tokens) >= maxModelLen:
		return p, fmt.Errorf("this model's maximum context length is %d tokens, but the prompt has %d tokens", maxModelLen, len(p.Tokens))
	case p.MaxTokens == 0:
		p.MaxTokens = maxModelLen - len(p.Tokens)
	case p.MaxTokens > maxModelLen-len(p.Tokens): // len+MaxTokens could overflow
		return p, fmt.Errorf("this model's maximum context length is %d tokens, but %d tokens were requested "+
			"(%d in the prompt, %d for the completion)", maxModelLen, len(p.Tokens)+p.MaxTokens, len(p.Tokens), p.MaxTokens)
	}
	return p, nil
}

// hash is the prompt's identity, which routes its samples to one engine of a data-parallel
// server, as a prefix-aware router keeps a group together.
func (p Prompt) hash() uint64 {
	h := uint64(0x7072)
	for _, t := range p.Tokens {
		h = mix64(h ^ t)
	}
	return h
}

// promptSpec is the request of one sample of p, numbered id, arriving now. Its output length is
// drawn from the workload's lognormal output distribution with a generator of its own, seeded
// from the fleet's seed and the id: the workload's generator is left alone.
func (s *Sim) promptSpec(p Prompt, id uint64) RequestSpec {
	seed := mix64(id ^ uint64(s.cfg.Seed) ^ 0x64726976656e)
	out := p.MaxTokens
	if !p.IgnoreEOS {
		w := s.cfg.Workload
		l := float64(w.OutputMedian) * math.Exp(w.OutputSigma*rand.New(rand.NewPCG(seed, 0)).NormFloat64())
		out = int(min(max(math.Round(l), 1), float64(p.MaxTokens)))
	}
	return RequestSpec{ID: id, Arrival: s.now, PromptLen: len(p.Tokens), prompt: &p, OutputSeed: seed,
		OutputLen: out, MaxTokens: p.MaxTokens}
}
