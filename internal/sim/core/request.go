package core

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// vocabSize keeps simulated token ids in the range of a real tokenizer (Qwen's).
const VocabSize = 151936

// RequestSpec describes one completion request as a client sends it. Tokens are not stored:
// the prompt is a system part of SystemLen tokens derived from SystemSeed followed by a question
// of PromptLen-SystemLen tokens derived from QuestionSeed, and output token i is derived from
// OutputSeed. Two requests with the same seeds and lengths therefore have the same prompt token
// for token, which is what lets the prefix cache find shared prefixes.
type RequestSpec struct {
	ID           uint64
	Arrival      time.Duration // simulated time the request reaches the engine
	SystemSeed   uint64
	SystemLen    int
	QuestionSeed uint64
	PromptLen    int
	OutputSeed   uint64
	// OutputLen is how many tokens the model will generate before it stops: at most MaxTokens,
	// and the request finishes with reason "length" when it equals MaxTokens, else "stop".
	OutputLen int
	MaxTokens int
	Batch     int // rollout batch number, or 0 outside a rollout
	// AbortAfter, when above 0, is the number of output tokens after which the client aborts
	// the request (fewer than OutputLen).
	AbortAfter int
	// prompt, when set, holds the prompt's token ids, PromptLen of them, which a client sent (see
	// drive.go); the seeds then give the output tokens only. A pointer keeps specs comparable.
	Prompt *Prompt
}

// request is a RequestSpec in flight inside one engine.
type Request struct {
	RequestSpec

	NumOutput   int // tokens generated so far
	numComputed int // tokens whose KV is in the cache (after a preemption: recomputed so far)
	hashes      []uint64
	blocks      []int32 // the block table
	numCached   int     // leading blocks of the table registered in the prefix cache
	// recomputeUpTo is the furthest position computed before the request's last preemption:
	// positions below it executed again are recomputed.
	recomputeUpTo int

	everScheduled  bool
	preempted      bool
	verifies       int // SGLang's verify passes of speculative decoding (spec_verify_ct)
	CachedTokens   int // prefix-cache hit at the first scheduling
	ExternalTokens int // tokens loaded from the external prefix cache at the first scheduling

	scheduledAt, firstTokenAt, lastTokenAt time.Duration
}

func newRequest(spec RequestSpec) *Request {
	r := &Request{RequestSpec: spec}
	r.hashes = make([]uint64, 0, (spec.PromptLen+spec.OutputLen)/snap.BlockSize+1)
	r.extendHashes()
	return r
}

func (r *Request) numTokens() int { return r.PromptLen + r.NumOutput }

// ended reports whether r finished or was aborted.
func (r *Request) ended() bool {
	return r.NumOutput >= r.OutputLen || r.AbortAfter > 0 && r.NumOutput >= r.AbortAfter
}

// token returns the id of token i of the request's sequence (prompt, then output).
func (r *Request) token(i int) uint64 {
	var x uint64
	switch {
	case r.Prompt != nil && i < r.PromptLen:
		return r.Prompt.Tokens[i]
	case i < r.SystemLen:
		x = Mix64(r.SystemSeed + uint64(i)*0x9e3779b97f4a7c15)
	case i < r.PromptLen:
		x = Mix64(r.QuestionSeed + uint64(i)*0x9e3779b97f4a7c15)
	default:
		x = Mix64(r.OutputSeed + uint64(i)*0x9e3779b97f4a7c15)
	}
	return x % VocabSize
}

// extendHashes computes the hash of every full block of known tokens not hashed yet. As in vLLM,
// block i's hash covers block i-1's hash and block i's tokens, so equal hashes mean equal
// prefixes, not only equal blocks.
func (r *Request) extendHashes() {
	full := r.numTokens() / snap.BlockSize
	for i := len(r.hashes); i < full; i++ {
		h := uint64(0x6a09e667f3bcc908)
		if i > 0 {
			h = r.hashes[i-1]
		}
		for t := i * snap.BlockSize; t < (i+1)*snap.BlockSize; t++ {
			h = Mix64(h ^ (r.token(t) + 0x243f6a8885a308d3))
		}
		r.hashes = append(r.hashes, h)
	}
}

// mix64 is the SplitMix64 finalizer: a cheap bijective scrambler for deriving ids.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
