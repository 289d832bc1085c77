package vllmpage

import (
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// The families; their HELP texts are vLLM's own.
var (
	famRecomputed = counter("vllm:recomputed_token_executions", "Cumulative token positions executed again after preemption.",
		func(s *snap.EngineStats) int64 { return s.Shape.Recomputed })
	famEstFlops = floatCounter("vllm:estimated_flops_per_gpu",
		"Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
		func(s *snap.EngineStats) float64 { return s.Shape.Flops })
	famEstRead = floatCounter("vllm:estimated_read_bytes_per_gpu",
		"Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
		func(s *snap.EngineStats) float64 { return s.Shape.ReadBytes })
	famEstWrite = floatCounter("vllm:estimated_write_bytes_per_gpu",
		"Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
		func(s *snap.EngineStats) float64 { return s.Shape.WriteBytes })
	famKVLifetime = hist("vllm:kv_block_lifetime_seconds",
		"Histogram of KV cache block lifetime from allocation to eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Shape.KvLifetime })
	famKVIdle = hist("vllm:kv_block_idle_before_evict_seconds",
		"Histogram of idle time before KV cache block eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Shape.KvIdle })
	famKVReuse = hist("vllm:kv_block_reuse_gap_seconds",
		"Histogram of time gaps between consecutive KV cache block accesses. Only the most recent accesses are recorded "+
			"(ring buffer). Sampled metrics (controlled by --kv-cache-metrics-sample).",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Shape.KvReuse })
)

func floatCounter(name, help string, v func(*snap.EngineStats) float64) family {
	return family{name: name, help: help, kind: famCounter, value: func(s *snap.EngineStats, _ int) float64 { return v(s) }}
}

// withShape returns v with the families above that cfg turns on, after v's own (and before the
// optional families withOptions adds, the RL families last as vLLM lists them): the recomputed
// positions always, the MFU counters and the residency histograms when cfg asks for them
// (vLLM registers its PerfMetricsProm and residency histograms after its other families).
func (v *version) withShape(cfg fleetconfig.Config) *version {
	if !cfg.Shapes(v.Release) {
		return v
	}
	o := *v
	o.families = append(append([]family(nil), v.families...), famRecomputed)
	if cfg.KVCacheMetrics {
		o.families = append(o.families, famKVLifetime, famKVIdle, famKVReuse)
	}
	if cfg.MFUMetrics {
		o.families = append(o.families, famEstFlops, famEstRead, famEstWrite)
	}
	return &o
}
