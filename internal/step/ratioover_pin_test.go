package step

import (
	"testing"
	"time"
)

// TestRatioOfOneKept: a step whose numerator equals its denominator (every prompt token a
// cache hit) has a hit rate of exactly 1, a figure like any other: kept in the worker's record,
// the fleet's and the worst worker's, for vLLM and SGLang, and no target is named over.
func TestRatioOfOneKept(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true, Scalars: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	for n := range 3 {
		i := float64(n)
		ts := t0.Add(time.Duration(n) * time.Second)
		tr.Observe(ts, "sg", mustSGLangPage(t, sgl{prompt: 100 * i, cached: 100 * i}), nil)
		tr.Observe(ts, "v", mustPage(t, eng{engine: "0", queries: 100 * i, hits: 100 * i}, eng{engine: "1", queries: 50 * i, hits: 50 * i}), nil)
	}
	r := tr.EndStep(1, t0.Add(3*time.Second))
	for _, key := range []string{"sglang/prefix_cache_hit_rate", "vllm/prefix_cache_hit_rate", "vllm/prefix_cache_hit_rate/worst_worker"} {
		want(t, r.Metrics, key, 1)
	}
	for _, w := range r.PerWorker {
		key := "vllm/prefix_cache_hit_rate"
		if w.Target == "sg" {
			key = "sglang/prefix_cache_hit_rate"
		}
		want(t, w.Metrics, key, 1)
	}
	if r.RatiosOver != nil {
		t.Errorf("RatiosOver %+v, want none", r.RatiosOver)
	}
}
