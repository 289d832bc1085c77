package tensorboard

import (
	"slices"
	"testing"
)

// TestKeySet: keys, include and exclude choose the scalars of the step, its phases and its
// workers; the images stay.
func TestKeySet(t *testing.T) {
	out := t.TempDir()
	rs := phaseRecords()
	rs[1].Plots = testPlots(t, out)
	evs := readEvents(t, writeAll(t, out, "{type: tensorboard, per_worker: true, keys: summary, include: ['vllm/*/kv_cache_usage_perc/p95'], exclude: ['vllm/generation_tokens']}", rs))
	if len(evs) != len(rs)+1 {
		t.Fatalf("got %d events, want %d", len(evs), len(rs)+1)
	}
	want := [][]string{
		{"vllm/num_preemptions", "vllm/prefix_cache_hit_rate", "vllm/num_preemptions/10.0.0.7:8000/0", "vllm/num_preemptions/gpu-3.internal:9000_vllm"},
		{"vllm/num_preemptions", "vllm/prefix_cache_hit_rate", "vllm/rollout/generation_tokens_per_s", "vllm/rollout/kv_cache_usage_perc/p95", "vllm/rollout/prefix_cache_hit_rate",
			"vllm/num_preemptions/10.0.0.7:8000/0", "vllm/num_preemptions/gpu-3.internal:9000_vllm"},
		{"vllm/num_preemptions", "vllm/prefix_cache_hit_rate", "vllm/rollout/generation_tokens_per_s", "vllm/rollout/kv_cache_usage_perc/p95", "vllm/rollout/prefix_cache_hit_rate",
			"vllm/num_preemptions/10.0.0.7:8000/0", "vllm/num_preemptions/gpu-3.internal:9000_vllm"},
		{"vllm/num_preemptions", "vllm/prefix_cache_hit_rate", "vllm/num_preemptions/10.0.0.7:8000/0", "vllm/num_preemptions/gpu-3.internal:9000_vllm"},
	}
	for i, r := range rs {
		var tags []string
		images := 0
		for _, v := range evs[i+1].Values {
			if v.Simple != nil {
				tags = append(tags, v.Tag)
			}
			if v.Image != nil {
				images++
			}
		}
		if !slices.Equal(tags, want[i]) {
			t.Errorf("step %d: scalars %q, want %q", r.Step, tags, want[i])
		}
		if images != len(r.Plots) {
			t.Errorf("step %d: %d images, want %d", r.Step, images, len(r.Plots))
		}
	}
}
