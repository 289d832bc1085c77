package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// TestDefaultWorkloadMovesEverything checks the demo setting (2 servers x 2 engines, GRPO
// defaults): batches of 5-10 s, a high but imperfect hit rate, a full KV cache, some
// preemptions, realistic latencies, and every histogram observed.
func TestDefaultWorkloadMovesEverything(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	s := mustSim(t, cfg)
	maxUsage, maxWaiting := 0.0, 0
	var batches []fleetmodel.BatchDone
	for at := 100 * time.Millisecond; at <= 60*time.Second; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.Engines {
			maxUsage = max(maxUsage, e.Stats.KvUsage)
			maxWaiting = max(maxWaiting, e.Stats.Waiting)
		}
		batches = append(batches, s.TakeBatches()...)
	}
	if len(batches) < 4 {
		t.Fatalf("only %d batches in 60 s", len(batches))
	}
	start := cfg.Workload.StartDelay
	for _, b := range batches {
		if d := b.At - start; d < 5*time.Second || d > 10*time.Second {
			t.Errorf("batch %d took %s", b.N, d)
		}
		start = b.At + cfg.Workload.Pause
	}
	tot := s.Totals()
	hitRate := tot["prefix_cache_hits"] / tot["prefix_cache_queries"]
	ttft := tot["time_to_first_token_seconds_sum"] / tot["time_to_first_token_seconds_count"]
	itl := tot["inter_token_latency_seconds_sum"] / tot["inter_token_latency_seconds_count"]
	t.Logf("batches %v hit rate %.3f preemptions %v max usage %.2f ttft %.3f s itl %.4f s", batches, hitRate, tot["num_preemptions"], maxUsage, ttft, itl)
	if hitRate < 0.8 || hitRate >= 1 {
		t.Errorf("hit rate %v", hitRate)
	}
	if tot["num_preemptions"] == 0 || maxUsage < 0.95 {
		t.Errorf("KV cache never under pressure: %v preemptions, max usage %v", tot["num_preemptions"], maxUsage)
	}
	if maxWaiting == 0 || tot["request_queue_time_seconds_sum"] == 0 {
		t.Errorf("nothing ever waited: max waiting %d, queue time %v", maxWaiting, tot["request_queue_time_seconds_sum"])
	}
	if ttft < 0.01 || ttft > 0.5 || itl < 0.008 || itl > 0.05 {
		t.Errorf("latencies out of range: ttft %v itl %v", ttft, itl)
	}
	for k, v := range tot {
		if strings.HasSuffix(k, "_count") && v == 0 {
			t.Errorf("%s never observed", k)
		}
	}
}
