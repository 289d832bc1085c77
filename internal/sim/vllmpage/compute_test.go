package vllmpage

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestShapeFamiliesOnPages checks which pages have the shape families (0.20 pages of a vLLM
// fleet: the recomputed positions always, the MFU counters and the residency histograms when
// asked for), that their HELP texts are vLLM's, and that the pages' values are the simulator's
// Totals, with every family moving in a run that preempts and hits the prefix cache.
func TestShapeFamiliesOnPages(t *testing.T) {
	base := fleetconfig.DefaultConfig()
	base.DP = 2
	for _, tt := range []struct {
		name        string
		version     string
		engine      string
		mfu, kv     bool
		recomputed  bool
		wantMFU     bool
		wantKVHists bool
	}{
		{"0.20 plain", "0.20", fleetconfig.EngineVLLM, false, false, true, false, false},
		{"0.20 all", "0.20", fleetconfig.EngineVLLM, true, true, true, true, true},
		{"0.10 asked", "0.10", fleetconfig.EngineVLLM, true, true, false, false, false},
		{"sglang asked", "0.20", fleetconfig.EngineSGLang, true, true, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Version, cfg.Engine, cfg.MFUMetrics, cfg.KVCacheMetrics = tt.version, tt.engine, tt.mfu, tt.kv
			s := mustSim(t, cfg)
			s.AdvanceTo(25 * time.Second)
			page := string(s.Page(0, simtest.Start))
			has := func(name string) bool { return strings.Contains(page, "\n# TYPE "+name+" ") }
			for name, want := range map[string]bool{
				"vllm:recomputed_token_executions_total":   tt.recomputed,
				"vllm:estimated_flops_per_gpu_total":       tt.wantMFU,
				"vllm:estimated_read_bytes_per_gpu_total":  tt.wantMFU,
				"vllm:estimated_write_bytes_per_gpu_total": tt.wantMFU,
				"vllm:kv_block_lifetime_seconds":           tt.wantKVHists,
				"vllm:kv_block_idle_before_evict_seconds":  tt.wantKVHists,
				"vllm:kv_block_reuse_gap_seconds":          tt.wantKVHists,
			} {
				if has(name) != want {
					t.Errorf("page has %s: %v, want %v", name, has(name), want)
				}
			}
			if tt.engine == fleetconfig.EngineSGLang {
				return
			}
			got, tot := simtest.TotalsFromPages(t, len(s.Servers), s.Page), s.Totals()
			simtest.CompareTotals(t, "at 25s", got, tot)
			for _, k := range []string{"recomputed_token_executions", "estimated_flops_per_gpu", "kv_block_lifetime_seconds_count"} {
				_, ok := tot[k]
				if want := has("vllm:"+strings.TrimSuffix(k, "_count")) || has("vllm:"+k+"_total"); ok != want {
					t.Errorf("Totals has %s: %v, the page %v", k, ok, want)
				}
				if ok && !(tot[k] > 0) {
					t.Errorf("%s never moved: %v", k, tot[k])
				}
			}
			if tt.wantKVHists && !(tot["kv_block_reuse_gap_seconds_count"] > 0 && tot["kv_block_idle_before_evict_seconds_sum"] <= tot["kv_block_lifetime_seconds_sum"]) {
				t.Errorf("residency totals: %v reuse gaps, idle %v s of lifetimes %v s", tot["kv_block_reuse_gap_seconds_count"],
					tot["kv_block_idle_before_evict_seconds_sum"], tot["kv_block_lifetime_seconds_sum"])
			}
			if tt.wantMFU && math.Abs(tot["estimated_write_bytes_per_gpu"]/cfg.Compute.KVBytesPerToken-tot["estimated_flops_per_gpu"]/(2*cfg.Compute.Params)) > 0.5 {
				t.Errorf("written KV and FLOPs count different tokens")
			}
		})
	}
}

// TestShapeHelpTexts pins the families' HELP texts to vLLM's (vllm/v1/metrics/perf.py,
// vllm/v1/metrics/loggers.py).
func TestShapeHelpTexts(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.MFUMetrics, cfg.KVCacheMetrics = true, true
	page := string(mustSim(t, cfg).Page(0, simtest.Start))
	for _, line := range []string{
		"# HELP vllm:estimated_flops_per_gpu_total Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
		"# HELP vllm:estimated_read_bytes_per_gpu_total Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
		"# HELP vllm:estimated_write_bytes_per_gpu_total Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
		"# HELP vllm:kv_block_lifetime_seconds Histogram of KV cache block lifetime from allocation to eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		"# HELP vllm:kv_block_idle_before_evict_seconds Histogram of idle time before KV cache block eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		"# HELP vllm:kv_block_reuse_gap_seconds Histogram of time gaps between consecutive KV cache block accesses. Only the most recent accesses are recorded (ring buffer). Sampled metrics (controlled by --kv-cache-metrics-sample).",
		`vllm:kv_block_lifetime_seconds_bucket{engine="0",le="1800.0",model_name="Qwen/Qwen3-1.7B"} 0.0`,
		`vllm:estimated_flops_per_gpu_total{engine="0",model_name="Qwen/Qwen3-1.7B"} 0.0`,
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("page lacks %q", line)
		}
	}
}
