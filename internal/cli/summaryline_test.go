package cli

import (
	"maps"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

func TestSummaryLine(t *testing.T) {
	full := &step.Record{Step: 3, DurationS: 30, Workers: 4, Metrics: map[string]float64{
		"vllm/prefix_cache_hit_rate": 0.812, "vllm/num_preemptions": 3,
		"vllm/kv_cache_usage_perc/mean": 0.42, "vllm/kv_cache_usage_perc/max": 0.97,
		"vllm/num_requests_running/mean": 12.5, "vllm/num_requests_waiting/mean": 3.1,
		"vllm/generation_tokens_per_s": 1234, "vllm/time_to_first_token_seconds/p50": 0.12,
	}}
	full.Scrapes.OK = 240
	// The same step with its phases: the rollout's figures at the end, the eval's not shown.
	phased := *full
	phased.Phases = map[string]*step.Phase{
		"rollout": {DurationS: 4.2, Intervals: 1, Metrics: map[string]float64{
			"vllm/generation_tokens_per_s": 2345.4, "vllm/prefix_cache_hit_rate": 0.81,
			"vllm/kv_cache_usage_perc/mean": 0.614, "vllm/kv_cache_usage_perc/max": 0.97,
			"vllm/num_requests_running/mean": 40,
		}},
		"eval": {DurationS: 3, Intervals: 1, Metrics: map[string]float64{"vllm/generation_tokens_per_s": 999}},
	}
	evalOnly := *full
	evalOnly.Phases = map[string]*step.Phase{"eval": phased.Phases["eval"]}
	emptyRollout := step.Record{Step: 1, DurationS: 2, Metrics: map[string]float64{}, Phases: map[string]*step.Phase{"rollout": {DurationS: 0.5, Intervals: 2}}}
	tests := []struct {
		name string
		rec  *step.Record
		want string
	}{
		{"every value", full, "step 3 | 30.0s | workers 4 | scrapes 240 ok 0 failed | hit 81.2% | preempt 3 | kv 0.42/0.97 | run 12.5 wait 3.1 | gen 1234 tok/s | ttft p50 0.120s | tail -"},
		// A step without requests has no TTFT and no token rate: a bare "-", no unit after it.
		{"no values", &step.Record{Step: 1, DurationS: 2, Metrics: map[string]float64{}}, "step 1 | 2.0s | workers 0 | scrapes 0 ok 0 failed | hit - | preempt - | kv -/- | run - wait - | gen - | ttft p50 - | tail -"},
		{"rollout phase", &phased, "step 3 | 30.0s | workers 4 | scrapes 240 ok 0 failed | hit 81.2% | preempt 3 | kv 0.42/0.97 | run 12.5 wait 3.1 | gen 1234 tok/s | ttft p50 0.120s | tail - | rollout 4.2s gen 2345 tok/s hit 81.0% kv 0.61/0.97"},
		{"eval phase only", &evalOnly, "step 3 | 30.0s | workers 4 | scrapes 240 ok 0 failed | hit 81.2% | preempt 3 | kv 0.42/0.97 | run 12.5 wait 3.1 | gen 1234 tok/s | ttft p50 0.120s | tail -"},
		{"newer engines' figures", &step.Record{Step: 2, DurationS: 2, Metrics: map[string]float64{
			"vllm/prefix_cache_hit_rate": 0.5, "vllm/prompt_tokens_computed": 250, "vllm/prompt_tokens_cached": 700,
			"vllm/prompt_tokens_transferred": 50, "vllm/truncated_fraction": 0.125, "vllm/mfu": 0.4123}},
			"step 2 | 2.0s | workers 0 | scrapes 0 ok 0 failed | hit 50.0% (computed 25.0%) | preempt - | kv -/- | run - wait - | gen - | ttft p50 - | tail - | clipped 12.5% | mfu 41.2%"},
		{"rollout phase without values", &emptyRollout, "step 1 | 2.0s | workers 0 | scrapes 0 ok 0 failed | hit - | preempt - | kv -/- | run - wait - | gen - | ttft p50 - | tail - | rollout 0.5s gen - hit - kv -/-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summaryLine(tt.rec, "vllm")
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if strings.Contains(got, "-s") || strings.Contains(got, "- tok/s") {
				t.Errorf("a unit after a missing value: %q", got)
			}
		})
	}
}

// TestSummaryLineEngines: the line shows the figures of the engine kind whose keys the record
// has (an SGLang fleet's under sglang/, or rollout/sglang/ with the prefix rollout/vllm), and
// each kind's after its name when it has keys of two.
func TestSummaryLineEngines(t *testing.T) {
	keys := func(prefix string, hit, gen float64) map[string]float64 {
		return map[string]float64{
			prefix + "/prefix_cache_hit_rate": hit, prefix + "/num_preemptions": 2,
			prefix + "/kv_cache_usage_perc/mean": 0.5, prefix + "/kv_cache_usage_perc/max": 0.75,
			prefix + "/num_requests_running/mean": 8, prefix + "/num_requests_waiting/mean": 1,
			prefix + "/generation_tokens_per_s": gen, prefix + "/time_to_first_token_seconds/p50": 0.25,
			prefix + "/straggler_tail_s": 1.5,
		}
	}
	merge := func(ms ...map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	sglang := &step.Record{Step: 2, DurationS: 10, Workers: 3, Metrics: keys("sglang", 0.5, 900),
		Stragglers: []step.Straggler{{Target: "http://h:30000/metrics", Labels: map[string]string{"dp_rank": "1"}}}}
	sglangPhase := &step.Record{Step: 2, DurationS: 10, Workers: 3, Metrics: keys("sglang", 0.5, 900),
		Phases: map[string]*step.Phase{"rollout": {DurationS: 4, Intervals: 1, Metrics: keys("sglang", 0.25, 1800)}}}
	mixed := &step.Record{Step: 4, DurationS: 10, Workers: 5, Metrics: merge(keys("vllm", 0.8, 1000), keys("sglang", 0.5, 900)),
		Stragglers: []step.Straggler{{Target: "http://h:8000/metrics"}},
		Phases:     map[string]*step.Phase{"rollout": {DurationS: 4, Intervals: 1, Metrics: merge(keys("vllm", 0.75, 2000), keys("sglang", 0.25, 1800))}}}
	tests := []struct {
		name, prefix string
		rec          *step.Record
		want         string
	}{
		{"sglang", "vllm", sglang, "step 2 | 10.0s | workers 3 | scrapes 0 ok 0 failed | hit 50.0% | preempt 2 | kv 0.50/0.75 | run 8.0 wait 1.0 | gen 900 tok/s | ttft p50 0.250s | tail 1.5s (h:30000[dp_rank=1])"},
		{"sglang with a rollout phase", "vllm", sglangPhase, "step 2 | 10.0s | workers 3 | scrapes 0 ok 0 failed | hit 50.0% | preempt 2 | kv 0.50/0.75 | run 8.0 wait 1.0 | gen 900 tok/s | ttft p50 0.250s | tail 1.5s | rollout 4.0s gen 1800 tok/s hit 25.0% kv 0.50/0.75"},
		{"sglang under a prefix ending in vllm", "rollout/vllm", &step.Record{Step: 2, DurationS: 10, Workers: 3, Metrics: keys("rollout/sglang", 0.5, 900)},
			"step 2 | 10.0s | workers 3 | scrapes 0 ok 0 failed | hit 50.0% | preempt 2 | kv 0.50/0.75 | run 8.0 wait 1.0 | gen 900 tok/s | ttft p50 0.250s | tail 1.5s"},
		{"a prefix of one's own", "fleet", &step.Record{Step: 2, DurationS: 10, Workers: 3, Metrics: keys("fleet", 0.5, 900)},
			"step 2 | 10.0s | workers 3 | scrapes 0 ok 0 failed | hit 50.0% | preempt 2 | kv 0.50/0.75 | run 8.0 wait 1.0 | gen 900 tok/s | ttft p50 0.250s | tail 1.5s"},
		{"vllm and sglang", "vllm", mixed, "step 4 | 10.0s | workers 5 | scrapes 0 ok 0 failed" +
			" | vLLM hit 80.0% | preempt 2 | kv 0.50/0.75 | run 8.0 wait 1.0 | gen 1000 tok/s | ttft p50 0.250s | tail 1.5s" +
			" | SGLang hit 50.0% | preempt 2 | kv 0.50/0.75 | run 8.0 wait 1.0 | gen 900 tok/s | ttft p50 0.250s | tail 1.5s" +
			" | stragglers h:8000 | rollout 4.0s vLLM gen 2000 tok/s hit 75.0% kv 0.50/0.75 SGLang gen 1800 tok/s hit 25.0% kv 0.50/0.75"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summaryLine(tt.rec, tt.prefix); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
