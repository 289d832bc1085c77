package fleetconfig

// validateTRTLLM refuses what a TensorRT-LLM fleet's pages cannot show as trtllm-serve would.
// trtllm-serve serves one executor's statistics on one page with no engine label, so a server
// has one engine; the speculative-decoding, external-cache and vLLM-only families are not
// simulated on its page, so the settings that would need them are refused rather than left
// unseen.
func (c Config) validateTRTLLM(bad func(string, ...any)) {
	if c.DP > 1 {
		bad("a trtllm server's page shows one executor with no engine label: use dp 1, got %d", c.DP)
	}
	if c.SpecDecode > 0 {
		bad("spec decode is not simulated on trtllm pages: use it with engine vllm or sglang")
	}
	if c.KVConnector {
		bad("kv connector is not simulated on trtllm pages: use it with engine vllm or sglang")
	}
	if c.MFUMetrics || c.KVCacheMetrics {
		bad("mfu-metrics and kv-cache-metrics are vLLM's: use them with engine vllm")
	}
}

// MetricsPath is where the fleet's servers serve their Prometheus page: trtllm-serve mounts its
// at /prometheus/metrics (OpenAIServer.mount_metrics), since its /metrics answers the
// executor's iteration statistics in JSON; vLLM and SGLang serve theirs at /metrics.
func (c Config) MetricsPath() string {
	if c.Engine == EngineTRTLLM {
		return "/prometheus/metrics"
	}
	return "/metrics"
}
