package step

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// trtllmWant is what the step between trtllm-step-a.prom and trtllm-step-b.prom holds, as the
// renderer computed it from the second batch's requests and iterations
// (internal/page/testdata/trtllm-render/scenarios.py).
func trtllmWant(t *testing.T) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile("testdata/trtllm-step-want.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]float64
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// A TensorRT-LLM server's step gets the keys of a vLLM server's, under the prefix trtllm, from
// TensorRT-LLM's names on pages rendered from its declarations: the counters' increases over
// the step (tokens, finished requests by reason and the truncated share, cached tokens and the
// hit rate they make with the prompt tokens, draft and accepted tokens), the gauges' statistics
// over the step's samples, the histograms' means.
func TestTRTLLMStepKeys(t *testing.T) {
	want := trtllmWant(t)
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	t0 := time.Unix(2_000_000_000, 0)
	tr.Begin(t0)
	tr.Observe(t0, "trt", readFixturePage(t, "trtllm-step-a.prom"), nil)
	tr.Observe(t0.Add(time.Second), "trt", readFixturePage(t, "trtllm-step-b.prom"), nil)
	r := tr.EndStep(1, t0.Add(2*time.Second))
	want["trtllm/generation_tokens_per_s"] = want["trtllm/generation_tokens"] / 2
	want["trtllm/prompt_tokens_per_s"] = want["trtllm/prompt_tokens"] / 2
	for k, v := range want {
		if got, ok := r.Metrics[k]; !ok || math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	for k := range r.Metrics {
		if !strings.HasPrefix(k, "trtllm/") {
			t.Errorf("key %s of a TensorRT-LLM-only fleet", k)
		}
	}
	// Its page has no preemption counter, no prefix-cache query counters and no inter-token
	// latency: those keys are absent, not 0.
	for _, k := range []string{"trtllm/num_preemptions", "trtllm/prefix_cache_queries", "trtllm/inter_token_latency_seconds/p50",
		"trtllm/spec_decode_mean_acceptance_length", "trtllm/num_paused_reqs/mean"} {
		if v, ok := r.Metrics[k]; ok {
			t.Errorf("%s = %v on a page without its family", k, v)
		}
	}
	if r.Workers != 1 || len(r.PerWorker) != 1 || r.PerWorker[0].Metrics["trtllm/prompt_tokens"] != want["trtllm/prompt_tokens"] {
		t.Errorf("workers %d, per worker %+v", r.Workers, r.PerWorker)
	}
}

// A fleet of vLLM and TensorRT-LLM servers gets each kind's keys from its own workers: the
// fleet's tokens and hit rate are not added across kinds, and each kind's balance compares
// its own workers.
func TestMixedVLLMTRTLLMFleetKeys(t *testing.T) {
	want := trtllmWant(t)
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	t0 := time.Unix(2_000_000_000, 0)
	tr.Begin(t0)
	v := func(gen float64) *eng {
		return &eng{engine: "0", queries: 10 * gen, hits: 5 * gen, prompt: 10 * gen, gen: gen, running: 1}
	}
	for i, f := range []string{"trtllm-step-a.prom", "trtllm-step-b.prom"} {
		ts := t0.Add(time.Duration(i) * time.Second)
		gen := float64(100 * (i + 1))
		other := *v(3 * gen)
		other.engine = "1"
		tr.Observe(ts, "vllm-0", mustPage(t, *v(gen), other), nil)
		tr.Observe(ts, "trt-0", readFixturePage(t, f), nil)
	}
	r := tr.EndStep(1, t0.Add(2*time.Second))
	for k, w := range map[string]float64{
		"vllm/generation_tokens":       100 + 300,
		"vllm/prompt_tokens":           1000 + 3000,
		"vllm/prefix_cache_hit_rate":   0.5,
		"trtllm/generation_tokens":     want["trtllm/generation_tokens"],
		"trtllm/prompt_tokens":         want["trtllm/prompt_tokens"],
		"trtllm/prefix_cache_hit_rate": want["trtllm/prefix_cache_hit_rate"],
		"trtllm/truncated_fraction":    want["trtllm/truncated_fraction"],
		// Each kind's balance is over its own workers: the vLLM engines generated 1:3.
		"vllm/generation_tokens_imbalance":   1.5,
		"vllm/num_requests_running/mean":     1, // per engine, as in a vLLM-only fleet
		"trtllm/num_requests_running/mean":   want["trtllm/num_requests_running/mean"],
		"trtllm/worker_idle_fraction/mean":   0,
		"vllm/worker_idle_fraction/mean":     0,
		"trtllm/spec_decode_acceptance_rate": want["trtllm/spec_decode_acceptance_rate"],
	} {
		if got, ok := r.Metrics[k]; !ok || math.Abs(got-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, w)
		}
	}
	// One TensorRT-LLM worker: no imbalance among its kind's workers to tell.
	if _, ok := r.Metrics["trtllm/generation_tokens_imbalance"]; ok {
		t.Error("a TensorRT-LLM imbalance from one worker")
	}
	for k := range r.Metrics {
		if !strings.HasPrefix(k, "vllm/") && !strings.HasPrefix(k, "trtllm/") {
			t.Errorf("key %s of neither kind", k)
		}
	}
	if r.Workers != 3 {
		t.Errorf("workers %d, want 2 vLLM engines and 1 TensorRT-LLM server", r.Workers)
	}
	for _, w := range r.PerWorker {
		for k := range w.Metrics {
			if strings.HasPrefix(w.Target, "vllm") != strings.HasPrefix(k, "vllm/") {
				t.Errorf("worker %s %s has key %s", w.Target, w.Engine, k)
			}
		}
	}
}

// trt is one TensorRT-LLM server's cumulative values for a generated page, spelled as
// trtllm-serve's multiprocess page spells them.
type trt struct {
	running, waiting, usage   float64
	prompt, gen, cached, stop float64
}

func trtllmPage(w trt) string {
	const lb = `engine_type="pytorch",model_name="m"`
	var b strings.Builder
	fmt.Fprintf(&b, "trtllm_num_requests_running{%s,pid=\"7\"} %v\n", lb, w.running)
	fmt.Fprintf(&b, "trtllm_num_requests_waiting{%s,pid=\"7\"} %v\n", lb, w.waiting)
	fmt.Fprintf(&b, "trtllm_kv_cache_utilization{%s,pid=\"7\"} %v\n", lb, w.usage)
	fmt.Fprintf(&b, "trtllm_prompt_tokens_total{%s} %v\n", lb, w.prompt)
	fmt.Fprintf(&b, "trtllm_generation_tokens_total{%s} %v\n", lb, w.gen)
	fmt.Fprintf(&b, "trtllm_prompt_cached_tokens_total{%s} %v\n", lb, w.cached)
	fmt.Fprintf(&b, "trtllm_request_success_total{%s,finished_reason=\"stop\"} %v\n", lb, w.stop)
	return b.String()
}

// TestTRTLLMUndetermined: trtllm-serve sets its gauges from the iteration statistics it drains
// when a request finishes, so a page whose gauges are as they were and on which no request
// finished repeats an old iteration: it cannot tell generating from idle, and its span is
// undetermined, as SGLang's stale log points are. A request finished (its tokens counted) or a
// gauge changed says the page is the engine's again; a page showing no running requests is
// idle.
//
//	t  page                                    state
//	1  running 2, as t0                        undetermined
//	2  a request finished, gauges as t0        generating
//	3  as t2                                   undetermined
//	4  as t2, KV usage changed                 generating
//	5  running 0                               idle
func TestTRTLLMUndetermined(t *testing.T) {
	base := trt{running: 2, waiting: 1, usage: 0.5, prompt: 100, gen: 40, cached: 10, stop: 1}
	finished := base
	finished.prompt, finished.gen, finished.cached, finished.stop = 300, 90, 50, 2
	drained := finished
	drained.usage = 0.6
	idle := drained
	idle.running = 0
	tr := NewTracker(Options{PerWorker: true})
	for i, w := range []trt{base, base, finished, finished, drained, idle} {
		observeText(t, tr, float64(i), trtllmPage(w))
	}
	r := tr.EndStep(1, at(5))
	wantLedger(t, r.Metrics, "trtllm", map[State]float64{Undetermined: 2, Generating: 2, Idle: 1})
}
