package sim

import (
	"testing"
	"time"
)

func TestSimDefaultsSmoke(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DP = 2
	s, err := NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 60; i++ {
		s.AdvanceTo(time.Duration(i) * time.Second)
		for _, b := range s.takeBatches() {
			t.Logf("batch %d done at %s", b.N, b.At)
		}
	}
	tot := s.Totals()
	t.Logf("hit rate %.3f preemptions %v gen %v prompt %v stop %v length %v ttft mean %.3f itl mean %.4f e2e mean %.2f queue mean %.2f",
		tot["prefix_cache_hits"]/tot["prefix_cache_queries"], tot["num_preemptions"], tot["generation_tokens"], tot["prompt_tokens"],
		tot["request_success/stop"], tot["request_success/length"],
		tot["time_to_first_token_seconds_sum"]/tot["time_to_first_token_seconds_count"],
		tot["inter_token_latency_seconds_sum"]/tot["inter_token_latency_seconds_count"],
		tot["e2e_request_latency_seconds_sum"]/tot["e2e_request_latency_seconds_count"],
		tot["request_queue_time_seconds_sum"]/tot["request_queue_time_seconds_count"])
}
