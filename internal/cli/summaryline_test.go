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
	tests := []struct {
		name string
		rec  *step.Record
		want string
	}{
		{"every value", full, "step 3 | 30.0s | workers 4 | scrapes 240 ok 0 failed | hit 81.2% | preempt 3 | kv 0.42/0.97 | run 12.5 wait 3.1 | gen 1234 tok/s | ttft p50 0.120s | tail -"},
		// A step without requests has no TTFT and no token rate: a bare "-", no unit after it.
		{"no values", &step.Record{Step: 1, DurationS: 2, Metrics: map[string]float64{}}, "step 1 | 2.0s | workers 0 | scrapes 0 ok 0 failed | hit - | preempt - | kv -/- | run - wait - | gen - | ttft p50 - | tail -"},
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
