package step

import (
	"fmt"
	"strings"
	"testing"
)

// TestFirstSampleNeverStale: a worker's first sample is never stale, also when the first-seen
// rule counts what it shows whole (its target's earlier pages did not show it) after a
// publish: nothing is known of its version before vllmstat saw it. Its next sample's tokens
// are, while it holds no version.
func TestFirstSampleNeverStale(t *testing.T) {
	t.Run("engine new on a target", func(t *testing.T) {
		tr := NewTracker(Options{})
		tr.Begin(at(0))
		tr.Observe(at(0), target, mustPage(t, eng{engine: "0", gen: 10, running: 1}), nil)
		tr.Observe(at(1), target, mustPage(t, eng{engine: "0", gen: 10, running: 1}), nil)
		if !tr.Publish(1, at(1.5)) {
			t.Fatal("publish refused")
		}
		// engine 1 comes up with 50 tokens, counted whole; engine 0 made none
		tr.Observe(at(2), target, mustPage(t, eng{engine: "0", gen: 10, running: 1}, eng{engine: "1", gen: 50, running: 1}), nil)
		r := tr.EndStep(1, at(2))
		want(t, r.Metrics, "vllm/generation_tokens", 50)
		want(t, r.Metrics, "vllm/policy/stale_generation_tokens", 0)
		want(t, r.Metrics, "vllm/policy/stale_token_fraction", 0)
		tr.Observe(at(3), target, mustPage(t, eng{engine: "0", gen: 10, running: 1}, eng{engine: "1", gen: 80, running: 1}), nil)
		r = tr.EndStep(2, at(3))
		want(t, r.Metrics, "vllm/policy/stale_generation_tokens", 30)
	})

	// SGLang's tokenizer, which counts a data-parallel server's generated tokens apart from its
	// DP ranks' schedulers, shows on the page once the first request finishes.
	t.Run("SGLang tokenizer after its DP ranks", func(t *testing.T) {
		ranks := sglangPage(sgl{dp: "0", running: 1}, sgl{dp: "1", running: 1})
		// the schedulers' lines only: sglangPage writes the tokenizer's beside rank 0's
		var sched string
		for l := range strings.Lines(ranks) {
			if strings.Contains(l, "dp_rank") {
				sched += l
			}
		}
		tok := func(gen float64) string {
			return sched + fmt.Sprintf("sglang:generation_tokens_total{engine_type=\"unified\",model_name=\"m\"} %v\n", gen)
		}
		tr := NewTracker(Options{})
		tr.Begin(at(0))
		observeText(t, tr, 0, sched)
		observeText(t, tr, 1, sched)
		if !tr.Publish(1, at(1.5)) {
			t.Fatal("publish refused")
		}
		observeText(t, tr, 2, tok(40))
		r := tr.EndStep(1, at(2))
		want(t, r.Metrics, "sglang/generation_tokens", 40)
		want(t, r.Metrics, "sglang/policy/stale_generation_tokens", 0)
		observeText(t, tr, 3, tok(70))
		r = tr.EndStep(2, at(3))
		want(t, r.Metrics, "sglang/policy/stale_generation_tokens", 30)
	})
}
