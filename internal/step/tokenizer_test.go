package step

import (
	"testing"
	"time"
)

// TestTokenizerNoEngine: two SGLang servers with data parallelism 2 are four engines; each
// server's tokenizer, a worker of its own with the server's token counts, is none. The step
// counts 4 workers, and no balance key compares tokenizers: with no engine counting tokens or
// cache hits of its own, there is no generation-token imbalance and no worst hit rate, while
// the engines' preemptions (SGLang's retractions) name the worst engine. The tokenizers keep
// their per_worker records, and the fleet's totals count their tokens.
func TestTokenizerNoEngine(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true, Scalars: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	for n := range 3 {
		i := float64(n)
		ts := t0.Add(time.Duration(n) * time.Second)
		tr.Observe(ts, "a", mustSGLangPage(t, sgl{dp: "0", running: 2, prompt: 100 * i, gen: 10 * i, cached: 50 * i, retracted: i},
			sgl{dp: "1", running: 2, retracted: 2 * i}), nil)
		tr.Observe(ts, "b", mustSGLangPage(t, sgl{dp: "0", running: 1, prompt: 100 * i, gen: 40 * i, cached: 80 * i},
			sgl{dp: "1", running: 0}), nil)
	}
	r := tr.EndStep(1, t0.Add(3*time.Second))
	if r.Workers != 4 {
		t.Errorf("workers %d, want 4 engines", r.Workers)
	}
	if len(r.PerWorker) != 6 {
		t.Errorf("%d per_worker records, want 6 (the tokenizers' too)", len(r.PerWorker))
	}
	want(t, r.Metrics, "sglang/generation_tokens", 100)
	want(t, r.Metrics, "sglang/prefix_cache_hit_rate", 0.65)
	absent(t, r.Metrics, "sglang/generation_tokens_imbalance")
	absent(t, r.Metrics, "sglang/prefix_cache_hit_rate/worst_worker")
	want(t, r.Metrics, "sglang/num_preemptions/worst_worker", 4)
	if w := r.WorstWorkers; w == nil || w.PrefixCacheHitRate != nil || w.NumPreemptions == nil || w.NumPreemptions.Labels["dp_rank"] != "1" {
		t.Errorf("worst workers %+v, want the preemptions of a's DP rank 1 alone", w)
	}
	want(t, r.Metrics, "sglang/worker_idle_fraction/max", 1)
	want(t, r.Metrics, "sglang/worker_idle_fraction/mean", 0.25)
}
