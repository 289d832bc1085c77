package step

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestWorkerOverflow: engine 0's counters add up past the float limit within the step (1e308
// twice), engine 1's stay small. Engine 0's own keys are absent, and so is every fleet key that
// depends on them, the worst-worker keys included; engine 1's keys and the per-interval samples,
// each finite, stay.
func TestWorkerOverflow(t *testing.T) {
	big := func(v float64) eng { return eng{engine: "0", gen: v, preempt: v, queries: v, hits: 1} }
	small := func(v float64) eng { return eng{engine: "1", gen: v, preempt: v, queries: 10 * v, hits: v} }
	recs := run(t, Options{Scalars: true, PerWorker: true}, []event{
		scrape(0, big(0), small(0)),
		scrape(1, big(1e308), small(1)),
		// Engine 0 restarted: its increase is 1, and its hits, 1 again, restarted with its other
		// counters (its page has no _created): 1 more.
		scrape(2, big(1), small(2)),
		scrape(3, big(1e308), small(3)),
		end(3, 1),
	})
	r := recs[0]
	for _, k := range []string{"generation_tokens", "generation_tokens_per_s", "generation_tokens/mean", "generation_tokens_imbalance",
		"num_preemptions", "num_preemptions/worst_worker", "prefix_cache_queries", "prefix_cache_hit_rate", "prefix_cache_hit_rate/worst_worker"} {
		absent(t, r.Metrics, "vllm/"+k)
	}
	want(t, r.Metrics, "vllm/generation_tokens/max", 1e308)
	want(t, r.Metrics, "vllm/prefix_cache_hits", 4)
	if r.WorstWorkers != nil {
		t.Errorf("worst workers %+v, want none: engine 0's totals overflowed", r.WorstWorkers)
	}
	e0, e1 := r.PerWorker[0].Metrics, r.PerWorker[1].Metrics
	for _, k := range []string{"generation_tokens", "num_preemptions", "prefix_cache_queries", "prefix_cache_hit_rate", "generation_tokens_per_s"} {
		absent(t, e0, "vllm/"+k)
	}
	want(t, e0, "vllm/prefix_cache_hits", 1)
	want(t, e1, "vllm/generation_tokens", 3)
	want(t, e1, "vllm/prefix_cache_hit_rate", 0.1)
	if _, err := MarshalLine(&r); err != nil {
		t.Errorf("the record does not encode: %v", err)
	}
}

// TestIncreaseOverflow: a counter that goes from -1e308 to 1e308 has an increase beyond the
// float limit. No key, interval value or timeline point holds it, nor any value computed from it.
func TestIncreaseOverflow(t *testing.T) {
	var ivs []Interval
	o := Options{Scalars: true, PerWorker: true, OnInterval: func(iv Interval) { ivs = append(ivs, iv.Clone()) }}
	recs := run(t, o, []event{
		scrape(0, eng{engine: "0", gen: -1e308, queries: -1e308, hits: 1}, eng{engine: "1", gen: 5}),
		scrape(1, eng{engine: "0", gen: 1e308, queries: 1e308, hits: 2}, eng{engine: "1", gen: 10}),
		end(1, 1),
	})
	r := recs[0]
	for _, k := range []string{"generation_tokens", "generation_tokens_per_s", "generation_tokens/mean", "generation_tokens/max",
		"generation_tokens/p95", "generation_tokens_imbalance", "prefix_cache_hit_rate", "prefix_cache_hit_rate/mean"} {
		absent(t, r.Metrics, "vllm/"+k)
	}
	want(t, r.PerWorker[1].Metrics, "vllm/generation_tokens", 5)
	for _, iv := range ivs {
		for _, kv := range iv.Values {
			if k, v := kv.Key, kv.V; math.IsInf(v, 0) || math.IsNaN(v) {
				t.Errorf("%s's interval at %v: %s = %v", iv.Engine, iv.TS, k, v)
			}
		}
	}
	if _, ok := ivs[2].Value("generation_tokens"); ivs[2].Engine != "0" || ok {
		t.Errorf("engine 0's second interval %+v, want it without generation_tokens", ivs[2])
	}
	for _, w := range r.Timeline.Workers {
		for name, ps := range w.Series {
			for _, p := range ps {
				if math.IsInf(p.Value, 0) || math.IsNaN(p.Value) {
					t.Errorf("%s's timeline %s holds %v", w.Engine, name, p.Value)
				}
			}
		}
	}
	if _, err := MarshalLine(&r); err != nil {
		t.Errorf("the record does not encode: %v", err)
	}
}

// TestSplitRatioOverflow: the drafts of two engines add up past the float limit, so the
// acceptance rate per position, accepted tokens over drafts, is absent for the fleet (not 0),
// and stays for each engine.
func TestSplitRatioOverflow(t *testing.T) {
	pg := func(drafts, accepted float64) string {
		var b strings.Builder
		for _, e := range []string{"0", "1"} {
			fmt.Fprintf(&b, "vllm:spec_decode_num_drafts_total{engine=%q} %g\n", e, drafts)
			fmt.Fprintf(&b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=%q,position=\"0\"} %g\n", e, accepted)
		}
		return b.String()
	}
	tr := NewTracker(Options{PerWorker: true})
	tr.Observe(at(0), target, mustPageText(pg(0, 0)), nil)
	tr.Observe(at(1), target, mustPageText(pg(1e308, 1e307)), nil)
	r := tr.EndStep(1, at(1))
	absent(t, r.Metrics, "vllm/spec_decode_num_drafts")
	absent(t, r.Metrics, "vllm/spec_decode_acceptance_rate_per_pos/0")
	want(t, r.PerWorker[0].Metrics, "vllm/spec_decode_acceptance_rate_per_pos/0", 0.1)
}
