package step

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// optPage renders the optional families as vLLM 0.20 prints them for one engine, from counter
// values c, per-position accepted tokens pos and waiting requests by reason.
func optPage(c map[string]float64, pos []float64, capacity, deferred float64) string {
	var b strings.Builder
	lbl := `engine="0",model_name="m"`
	for _, name := range []string{"spec_decode_num_drafts", "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens",
		"external_prefix_cache_queries", "external_prefix_cache_hits", "mm_cache_queries", "mm_cache_hits", "corrupted_requests"} {
		v, ok := c[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "# TYPE vllm:%s counter\nvllm:%s_total{%s} %g\n", name, name, lbl, v)
	}
	if pos != nil {
		b.WriteString("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n")
		for i, v := range pos {
			fmt.Fprintf(&b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%d\"} %g\n", lbl, i, v)
		}
	}
	if capacity >= 0 {
		// Two models on one engine: their series add up per reason.
		b.WriteString("# TYPE vllm:num_requests_waiting_by_reason gauge\n")
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason{%s,reason=\"capacity\"} %g\n", lbl, capacity)
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"m2\",reason=\"capacity\"} 1\n")
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason{%s,reason=\"deferred\"} %g\n", lbl, deferred)
	}
	return b.String()
}

func observeText(t *testing.T, tr *Tracker, ts float64, body string) {
	t.Helper()
	p, err := page.ParsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	tr.Observe(at(ts), target, p, nil)
}

func TestSpecDecodeAndCacheKeys(t *testing.T) {
	tr := NewTracker(Options{Scalars: true})
	observeText(t, tr, 0, optPage(map[string]float64{
		"spec_decode_num_drafts": 100, "spec_decode_num_draft_tokens": 300, "spec_decode_num_accepted_tokens": 150,
		"external_prefix_cache_queries": 1000, "external_prefix_cache_hits": 200,
		"mm_cache_queries": 10, "mm_cache_hits": 5, "corrupted_requests": 0,
	}, []float64{80, 50, 20}, 4, 0))
	observeText(t, tr, 1, optPage(map[string]float64{
		// 40 drafts of 3 tokens, 72 accepted: 30, 24 and 18 at positions 0, 1, 2.
		"spec_decode_num_drafts": 140, "spec_decode_num_draft_tokens": 420, "spec_decode_num_accepted_tokens": 222,
		"external_prefix_cache_queries": 1400, "external_prefix_cache_hits": 300,
		"mm_cache_queries": 10, "mm_cache_hits": 5, "corrupted_requests": 2,
	}, []float64{110, 74, 38}, 8, 2))
	m := tr.EndStep(1, at(1)).Metrics
	want(t, m, "vllm/spec_decode_num_drafts", 40)
	want(t, m, "vllm/spec_decode_num_draft_tokens", 120)
	want(t, m, "vllm/spec_decode_num_accepted_tokens", 72)
	want(t, m, "vllm/spec_decode_acceptance_rate", 72.0/120)
	want(t, m, "vllm/spec_decode_mean_acceptance_length", 1+72.0/40)
	want(t, m, "vllm/spec_decode_acceptance_rate_per_pos/0", 30.0/40)
	want(t, m, "vllm/spec_decode_acceptance_rate_per_pos/1", 24.0/40)
	want(t, m, "vllm/spec_decode_acceptance_rate_per_pos/2", 18.0/40)
	want(t, m, "vllm/external_prefix_cache_queries", 400)
	want(t, m, "vllm/external_prefix_cache_hits", 100)
	want(t, m, "vllm/external_prefix_cache_hit_rate", 0.25)
	want(t, m, "vllm/corrupted_requests", 2)
	// capacity: 4+1 then 8+1 (the second model's series adds up); deferred: 0 then 2.
	want(t, m, "vllm/num_requests_waiting_by_reason/capacity/mean", 7)
	want(t, m, "vllm/num_requests_waiting_by_reason/capacity/max", 9)
	want(t, m, "vllm/num_requests_waiting_by_reason/deferred/mean", 1)
	want(t, m, "vllm/num_requests_waiting_by_reason/deferred/p95", 1.9)
	for _, k := range []string{
		"vllm/mm_cache_hit_rate",                         // no queries in the step: no rate
		"vllm/mm_cache_queries",                          // only the rate is kept
		"vllm/spec_decode_num_accepted_tokens_per_pos/0", // only the per-position rate
		"vllm/num_requests_waiting_by_reason/capacity",   // a gauge has no total
	} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %v, want absent", k, v)
		}
	}
}

// A page without the optional families gives none of their keys: never a made-up 0.
func TestOptionalFamiliesAbsent(t *testing.T) {
	tr := NewTracker(Options{Scalars: true})
	observeText(t, tr, 0, renderPage(eng{}))
	observeText(t, tr, 1, renderPage(eng{}))
	m := tr.EndStep(1, at(1)).Metrics
	for k := range m {
		for _, p := range []string{"vllm/spec_decode", "vllm/external_prefix", "vllm/mm_cache", "vllm/corrupted", "vllm/num_requests_waiting_by_reason", "vllm/request_prefill_kv"} {
			if strings.HasPrefix(k, p) {
				t.Errorf("%s = %v on a page without the family", k, m[k])
			}
		}
	}
	if len(m) == 0 {
		t.Fatal("no keys at all: the page helper changed")
	}
}

// With no drafts in the step, the acceptance keys are absent, though the totals are 0.
func TestSpecDecodeIdleStep(t *testing.T) {
	tr := NewTracker(Options{})
	c := map[string]float64{"spec_decode_num_drafts": 5, "spec_decode_num_draft_tokens": 15, "spec_decode_num_accepted_tokens": 9}
	observeText(t, tr, 0, optPage(c, []float64{4, 3, 2}, -1, 0))
	observeText(t, tr, 1, optPage(c, []float64{4, 3, 2}, -1, 0))
	m := tr.EndStep(1, at(1)).Metrics
	want(t, m, "vllm/spec_decode_num_drafts", 0)
	for _, k := range []string{"vllm/spec_decode_acceptance_rate", "vllm/spec_decode_mean_acceptance_length", "vllm/spec_decode_acceptance_rate_per_pos/0"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %v in a step without drafts, want absent", k, v)
		}
	}
}

func TestPrefillKVComputedQuantiles(t *testing.T) {
	h := func(b1, b2, inf, sum float64) string {
		return "# TYPE vllm:request_prefill_kv_computed_tokens histogram\n" +
			fmt.Sprintf("vllm:request_prefill_kv_computed_tokens_bucket{engine=\"0\",le=\"100.0\",model_name=\"m\"} %g\n", b1) +
			fmt.Sprintf("vllm:request_prefill_kv_computed_tokens_bucket{engine=\"0\",le=\"200.0\",model_name=\"m\"} %g\n", b2) +
			fmt.Sprintf("vllm:request_prefill_kv_computed_tokens_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} %g\n", inf) +
			fmt.Sprintf("vllm:request_prefill_kv_computed_tokens_count{engine=\"0\",model_name=\"m\"} %g\n", inf) +
			fmt.Sprintf("vllm:request_prefill_kv_computed_tokens_sum{engine=\"0\",model_name=\"m\"} %g\n", sum)
	}
	tr := NewTracker(Options{})
	observeText(t, tr, 0, h(1, 2, 2, 250))
	// 10 more requests: 5 up to 100 tokens, 5 in (100, 200], 1500 tokens in all.
	observeText(t, tr, 1, h(6, 12, 12, 1750))
	m := tr.EndStep(1, at(1)).Metrics
	want(t, m, "vllm/request_prefill_kv_computed_tokens/mean", 150)
	want(t, m, "vllm/request_prefill_kv_computed_tokens/p50", 100)
	// A mean of 150 is the most these buckets allow: each request is at its bucket's bound,
	// and so is every quantile, 200 where interpolation would make up 190 and 198.
	want(t, m, "vllm/request_prefill_kv_computed_tokens/p95", 200)
	want(t, m, "vllm/request_prefill_kv_computed_tokens/p99", 200)
}
