package step

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
)

// sgl describes one SGLang worker's cumulative values for a generated page: its scheduler's
// series, and its tokenizer's (on a page without DP, the same worker).
type sgl struct {
	dp                       string // dp_rank, "" for none
	running, queue, usage    float64
	retracted                float64
	prompt, gen, cached, req float64
	decode                   float64 // realtime_tokens{mode="decode"}
	ttft                     []float64
	ttftSum                  float64
}

// sglangPage renders SGLang workers as prometheus_client renders SGLang's multiprocess page.
func sglangPage(ws ...sgl) string {
	var b strings.Builder
	for _, w := range ws {
		lbl := `engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
		if w.dp != "" {
			lbl = fmt.Sprintf(`dp_rank=%q,`, w.dp) + lbl
		}
		tok := `engine_type="unified",model_name="m"`
		fmt.Fprintf(&b, "sglang:num_running_reqs{%s} %v\n", lbl, w.running)
		fmt.Fprintf(&b, "sglang:num_queue_reqs{%s} %v\n", lbl, w.queue)
		fmt.Fprintf(&b, "sglang:token_usage{%s} %v\n", lbl, w.usage)
		fmt.Fprintf(&b, "sglang:cache_hit_rate{%s} 0.0\n", lbl)
		fmt.Fprintf(&b, "sglang:num_retracted_requests_total{%s} %v\n", lbl, w.retracted)
		fmt.Fprintf(&b, "sglang:realtime_tokens_total{%s,mode=\"decode\"} %v\n", lbl, w.decode)
		if w.dp == "" || w.dp == "0" {
			fmt.Fprintf(&b, "sglang:prompt_tokens_total{%s} %v\n", tok, w.prompt)
			fmt.Fprintf(&b, "sglang:generation_tokens_total{%s} %v\n", tok, w.gen)
			fmt.Fprintf(&b, "sglang:cached_tokens_total{cache_source=\"device\",%s} %v\n", tok, w.cached)
			fmt.Fprintf(&b, "sglang:num_requests_total{%s} %v\n", tok, w.req)
			if w.ttft != nil {
				fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_sum{%s} %v\n", tok, w.ttftSum)
				for i, le := range ttftBounds {
					fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_bucket{%s,le=%q} %v\n", tok, le, w.ttft[i])
				}
				fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_count{%s} %v\n", tok, w.ttft[len(w.ttft)-1])
			}
		}
	}
	return b.String()
}

func mustSGLangPage(t testing.TB, ws ...sgl) *page.Page {
	t.Helper()
	p, err := page.ParsePage([]byte(sglangPage(ws...)))
	if err != nil {
		t.Fatalf("parse generated page: %v\n%s", err, sglangPage(ws...))
	}
	return p
}

// An SGLang server's step gets the keys of a vLLM server's, under the prefix sglang, from
// SGLang's names: its hit rate is the cached over the prompt tokens of the step, exactly.
func TestSGLangStepKeys(t *testing.T) {
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	tr.Observe(t0, "sg", mustSGLangPage(t, sgl{running: 4, queue: 1, usage: 0.25, prompt: 1000, gen: 500, cached: 400, req: 10, retracted: 2, decode: 600,
		ttft: []float64{1, 2, 3, 3}, ttftSum: 1.2}), nil)
	tr.Observe(t0.Add(time.Second), "sg", mustSGLangPage(t, sgl{running: 6, queue: 0, usage: 0.5, prompt: 3000, gen: 1500, cached: 1900, req: 30, retracted: 5, decode: 1800,
		ttft: []float64{3, 6, 8, 9}, ttftSum: 4.8}), nil)
	r := tr.EndStep(1, t0.Add(2*time.Second))
	want := map[string]float64{
		"sglang/prompt_tokens":                   2000,
		"sglang/generation_tokens":               1000,
		"sglang/cached_tokens":                   1500,
		"sglang/num_requests":                    20,
		"sglang/num_preemptions":                 3,
		"sglang/realtime_tokens/decode":          1200,
		"sglang/prefix_cache_hit_rate":           0.75,
		"sglang/num_requests_running/max":        6,
		"sglang/num_requests_running/mean":       5,
		"sglang/kv_cache_usage_perc/max":         0.5,
		"sglang/generation_tokens_per_s":         500,
		"sglang/time_to_first_token_seconds/p50": 0.3,
	}
	for k, v := range want {
		if got, ok := r.Metrics[k]; !ok || math.Abs(got-v) > 1e-12 {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	for k := range r.Metrics {
		if !strings.HasPrefix(k, "sglang/") {
			t.Errorf("key %s of an SGLang-only fleet", k)
		}
	}
	if len(r.PerWorker) != 1 || r.PerWorker[0].Metrics["sglang/prompt_tokens"] != 2000 {
		t.Errorf("per worker %+v", r.PerWorker)
	}
}

// A fleet of vLLM and SGLang workers gets each kind's keys from its own workers, fleet-wide keys
// per kind included: the fleet's tokens are not added across kinds, and each kind's balance
// compares its own workers.
func TestMixedFleetKeys(t *testing.T) {
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	v := func(gen, running float64) *page.Page {
		return mustPage(t, eng{engine: "0", queries: 10 * gen, hits: 5 * gen, prompt: 10 * gen, gen: gen, running: running},
			eng{engine: "1", queries: 10 * gen, hits: 2 * gen, prompt: 10 * gen, gen: 3 * gen, running: running})
	}
	s := func(gen, running float64) *page.Page {
		return mustSGLangPage(t, sgl{dp: "0", running: running, prompt: 10 * gen, gen: gen, cached: 9 * gen}, sgl{dp: "1", running: running})
	}
	for i, x := range []float64{0, 100, 200} {
		ts := t0.Add(time.Duration(i) * time.Second)
		tr.Observe(ts, "vllm-0", v(x, 1), nil)
		tr.Observe(ts, "sglang-0", s(x, 2), nil)
	}
	r := tr.EndStep(1, t0.Add(3*time.Second))
	for k, want := range map[string]float64{
		"vllm/generation_tokens":                  800,
		"sglang/generation_tokens":                200,
		"vllm/prefix_cache_hit_rate":              0.35,
		"sglang/prefix_cache_hit_rate":            0.9,
		"vllm/generation_tokens_imbalance":        1.5,
		"vllm/num_requests_running/mean":          1,
		"sglang/num_requests_running/mean":        2,
		"vllm/prefix_cache_hit_rate/p95":          0.5,
		"vllm/worker_idle_fraction/mean":          0,
		"sglang/worker_idle_fraction/mean":        0,
		"vllm/prefix_cache_hit_rate/worst_worker": 0.2,
	} {
		if got, ok := r.Metrics[k]; !ok || math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, want)
		}
	}
	// SGLang's tokenizer counts the server's tokens once, without a DP rank: one worker has
	// them, so there is no imbalance among SGLang's workers to tell.
	if _, ok := r.Metrics["sglang/generation_tokens_imbalance"]; ok {
		t.Error("an SGLang imbalance from one worker's tokens")
	}
	if r.Workers != 4 {
		t.Errorf("workers %d, want 2 vLLM engines and 2 SGLang DP ranks, SGLang's tokenizer no engine", r.Workers)
	}
	if r.WorstWorkers == nil || r.WorstWorkers.PrefixCacheHitRate == nil || r.WorstWorkers.PrefixCacheHitRate.Target != "vllm-0" {
		t.Errorf("worst workers %+v", r.WorstWorkers)
	}
	for _, w := range r.PerWorker {
		for k := range w.Metrics {
			if strings.HasPrefix(w.Target, "vllm") != strings.HasPrefix(k, "vllm/") {
				t.Errorf("worker %s %s has key %s", w.Target, w.Engine, k)
			}
		}
	}
	// A phase's keys keep each kind's prefix, the phase's name after it.
	if got := PhaseKey("vllm", "rollout", "sglang/prompt_tokens"); got != "sglang/rollout/prompt_tokens" {
		t.Errorf("PhaseKey = %q", got)
	}
}

// A target's SGLang tokenizers are counted apart from its workers within a step: a server with
// DP ranks is its DP ranks' workers and a tokenizer.
func TestStepTokenizers(t *testing.T) {
	tr := NewTracker(Options{})
	t0 := time.Unix(1_700_000_000, 0)
	two := mustSGLangPage(t, sgl{dp: "0", prompt: 1}, sgl{dp: "1"})
	if w, k := tr.StepWorkers("sg", two), tr.StepTokenizers("sg", two); w != 2 || k != 1 {
		t.Fatalf("a page of 2 DP ranks and a tokenizer: %d workers, %d tokenizers", w, k)
	}
	tr.Observe(t0, "sg", two, nil)
	three := mustSGLangPage(t, sgl{dp: "0", prompt: 1}, sgl{dp: "2"})
	if w, k := tr.StepWorkers("sg", three), tr.StepTokenizers("sg", three); w != 3 || k != 1 {
		t.Errorf("then DP ranks 0 and 2: %d workers, %d tokenizers; want 3 and 1", w, k)
	}
	tr.EndStep(1, t0.Add(time.Second))
	if w, k := tr.StepWorkers("sg", three), tr.StepTokenizers("sg", three); w != 2 || k != 1 {
		t.Errorf("in the next step: %d workers, %d tokenizers; want 2 and 1", w, k)
	}
}
