package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
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

// TestRestartInSim checks the model side of a restart: the page starts from zero with a new
// _created, while Totals keep counting.
func TestRestartInSim(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: 5 * time.Second, Server: 0}}
	s := mustSim(t, cfg)
	s.AdvanceTo(5*time.Second - time.Millisecond)
	before := s.Totals()
	page0 := simtest.ParsePage(t, s.Page(0, simtest.Start))
	s.AdvanceTo(5 * time.Second)
	after := simtest.ParsePage(t, s.Page(0, simtest.Start))
	if got := after["vllm:generation_tokens_total"].Metric[0].Counter.GetValue(); got != 0 {
		t.Errorf("generation tokens right after restart: %v", got)
	}
	c0 := page0["vllm:generation_tokens_created"].Metric[0].Gauge.GetValue()
	c1 := after["vllm:generation_tokens_created"].Metric[0].Gauge.GetValue()
	if c1-c0 < 4.99 || c1-c0 > 5.01 {
		t.Errorf("_created moved from %v to %v, want 5 s later", c0, c1)
	}
	tot := s.Totals()
	if tot["generation_tokens"] < before["generation_tokens"] || tot["requests_lost"] == 0 || tot["restarts"] != 1 {
		t.Errorf("totals across restart: before %v after %v lost %v restarts %v",
			before["generation_tokens"], tot["generation_tokens"], tot["requests_lost"], tot["restarts"])
	}
	s.AdvanceTo(30 * time.Second)
	compareLives := simtest.TotalsFromPages(t, len(s.Servers), s.Page)
	// The pages show only the current life of server 0; the simulator's totals include the
	// first one, so they are larger.
	if compareLives["generation_tokens"] >= s.Totals()["generation_tokens"] {
		t.Errorf("pages %v, totals %v", compareLives["generation_tokens"], s.Totals()["generation_tokens"])
	}
	if st := s.Servers[0].Engines[0]; st.Busy() && st.Pool.NumUsed() == 0 {
		t.Error("busy engine with an empty cache")
	}
}

func TestPoissonWorkload(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.Workload.Kind = workload.WorkloadPoisson
	cfg.Workload.Rate = 10
	s := mustSim(t, cfg)
	s.AdvanceTo(60 * time.Second)
	tot := s.Totals()
	n := tot["request_success/stop"] + tot["request_success/length"]
	if n < 450 || n > 700 {
		t.Errorf("%v requests finished in 60 s at 10/s", n)
	}
	if b := s.TakeBatches(); len(b) != 0 {
		t.Errorf("poisson workload finished batches %v", b)
	}
	if hr := tot["prefix_cache_hits"] / tot["prefix_cache_queries"]; hr < 0.3 || hr >= 1 {
		t.Errorf("hit rate %v", hr)
	}
}
