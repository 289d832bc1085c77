package core

import (
	"fmt"
	"hash/fnv"
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
		ids[i] = Mix64(h.Sum64()) % VocabSize
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
		out[i] = uint64(id) % VocabSize
	}
	return out
}

// check returns p with its default MaxTokens set, or what is wrong with it for a model of
// maxModelLen tokens.
func (p Prompt) Check(maxModelLen int) (Prompt, error) {
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
func (p Prompt) Hash() uint64 {
	h := uint64(0x7072)
	for _, t := range p.Tokens {
		h = Mix64(h ^ t)
	}
	return h
}
