package cli

import (
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
