"""TensorRT-LLM's metric families, declared as tensorrt_llm/metrics/collector.py's MetricsCollector
declares them (names, HELP texts, label names and their order, buckets), and set as its
log_request_metrics_dict, log_iteration_stats and log_config_info set them: which call creates
or moves which series. Written from reading that file; trtllm-serve creates the collector with
the labels model_name and engine_type (tensorrt_llm/serve/openai_server.py) and serves it from a
prometheus_client multiprocess registry. The callers give the values."""
from prometheus_client import Counter, Gauge, Histogram

LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
           1920.0, 7680.0]
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
        160.0, 640.0, 2560.0]
TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
PREFILL = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
CACHED = [0, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
PERPLEXITY = [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 500.0, 1000.0]
CTX_TOKENS = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]

# The gauges of log_iteration_stats, by the field of the iteration statistics that sets each.
ITER_GAUGES = [
    ("num_requests_running", "Number of active requests", None, "numActiveRequests"),
    ("num_requests_waiting", "Number of queued requests", None, "numQueuedRequests"),
    ("max_num_active_requests", "Maximum number of active requests", None, "maxNumActiveRequests"),
    ("gpu_memory_usage_bytes", "GPU memory usage in bytes", None, "gpuMemUsage"),
    ("cpu_memory_usage_bytes", "CPU memory usage in bytes", None, "cpuMemUsage"),
    ("pinned_memory_usage_bytes", "Pinned memory usage in bytes", None, "pinnedMemUsage"),
    ("max_batch_size_static", "Static maximum batch size", None, "maxBatchSizeStatic"),
    ("max_batch_size_runtime", "Runtime maximum batch size", None, "maxBatchSizeRuntime"),
    ("max_num_tokens_runtime", "Runtime maximum number of tokens", None, "maxNumTokensRuntime"),
    ("kv_cache_max_blocks", "Maximum number of KV cache blocks", "kvCacheStats", "maxNumBlocks"),
    ("kv_cache_free_blocks", "Number of free KV cache blocks", "kvCacheStats", "freeNumBlocks"),
    ("kv_cache_used_blocks", "Number of used KV cache blocks", "kvCacheStats", "usedNumBlocks"),
    ("kv_cache_tokens_per_block", "Number of tokens per KV cache block", "kvCacheStats", "tokensPerBlock"),
    ("num_context_requests", "Number of context (prefill) requests", "inflightBatchingStats", "numContextRequests"),
    ("num_generation_requests", "Number of generation (decode) requests", "inflightBatchingStats", "numGenRequests"),
    ("num_paused_requests", "Number of paused requests", "inflightBatchingStats", "numPausedRequests"),
    ("num_scheduled_requests", "Number of scheduled requests", "inflightBatchingStats", "numScheduledRequests"),
    ("total_context_tokens", "Total number of context tokens", "inflightBatchingStats", "numCtxTokens"),
    ("avg_decoded_tokens_per_iter", "Average number of decoded tokens per iteration", "inflightBatchingStats",
     "avgNumDecodedTokensPerIter"),
    ("spec_decode_acceptance_length", "Acceptance length in speculative decoding", "specDecodingStats", "acceptanceLength"),
    ("spec_decode_draft_overhead", "Draft overhead in speculative decoding", "specDecodingStats", "draftOverhead"),
]


class Collector:
    """One trtllm-serve's MetricsCollector; prefix is trtllm_ (Dynamo's older releases spell it
    trtllm:)."""

    def __init__(self, labels, prefix="trtllm_"):
        self.labels, self.p = dict(labels), prefix
        names = list(self.labels)
        p = prefix

        def hist(name, doc, buckets, extra=()):
            return Histogram(p + name, doc, names + list(extra), buckets=buckets)

        self.success = Counter(p + "request_success_total", "Count of successfully processed requests.",
                               names + ["finished_reason"])
        self.e2e = hist("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", LATENCY)
        self.ttft = hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT)
        self.tpot = hist("time_per_output_token_seconds", "Histogram of time per output token in seconds.", TPOT)
        self.queue = hist("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", LATENCY)
        self.prefill = hist("request_prefill_time_seconds",
                            "Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).",
                            PREFILL)
        self.decode = hist("request_decode_time_seconds",
                           "Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).",
                           LATENCY)
        self.inference = hist("request_inference_time_seconds",
                              "Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).",
                              LATENCY)
        self.prompt = Counter(p + "prompt_tokens_total", "Cumulative number of prompt (input) tokens processed.", names)
        self.generation = Counter(p + "generation_tokens_total", "Cumulative number of generation (output) tokens produced.",
                                  names)
        self.hit_rate = Gauge(p + "kv_cache_hit_rate", "KV cache hit rate", names)
        self.reused = Counter(p + "kv_cache_reused_blocks", "Cumulative number of KV cache blocks reused (cache hits)", names)
        self.missed = Counter(p + "kv_cache_missed_blocks", "Cumulative number of KV cache blocks missed (cache misses)", names)
        self.utilization = Gauge(p + "kv_cache_utilization", "KV cache utilization", names)
        self.prev_reused = self.prev_missed = 0
        self.completed = Counter(p + "num_requests_completed_total", "Total number of completed requests across iterations",
                                 names)
        self.iter_latency = Gauge(p + "iteration_latency_seconds", "Iteration latency in seconds", names)
        self.gauges = [(Gauge(p + n, doc, names), group, field) for n, doc, group, field in ITER_GAUGES]
        self.drafts = Counter(p + "spec_decode_num_draft_tokens_total", "Total number of draft tokens in speculative decoding",
                              names)
        self.accepted = Counter(p + "spec_decode_num_accepted_tokens_total",
                                "Total number of accepted tokens in speculative decoding", names)
        self.cached = Counter(p + "prompt_cached_tokens_total",
                              "Process-lifetime total prompt tokens served from KV cache. Resets only when the serving "
                              "process restarts, not when the KV cache is flushed or evicted.", names)
        self.cached.labels(**self.labels)  # created with the collector: at 0 before any request
        self.cached_per_request = hist("prompt_cached_tokens_per_request", "Histogram of cached prompt tokens per request.",
                                       CACHED)
        self.occupancy = Gauge(p + "prefill_batch_occupancy", "Fraction of max active slots occupied by context requests.",
                               names)
        self.ctx_tokens = hist("prefill_batch_tokens", "Histogram of total context tokens per iteration.", CTX_TOKENS)
        self.errors = Counter(p + "request_error_total", "Total request errors, labeled by HTTP status code.",
                              names + ["http_code"])

    def finished(self, reason, prompt, generation, cached, e2e, ttft, tpot, queue, prefill, decode, inference):
        """A request's finish, as log_request_metrics_dict records it: a histogram observes only
        a non-zero value (the queue time any value), the token counters only a non-zero count."""
        lb = self.labels
        self.success.labels(**lb, finished_reason=reason).inc()
        for h, v in ((self.e2e, e2e), (self.ttft, ttft), (self.tpot, tpot)):
            if v:
                h.labels(**lb).observe(v)
        self.queue.labels(**lb).observe(queue)
        for h, v in ((self.prefill, prefill), (self.decode, decode), (self.inference, inference)):
            if v:
                h.labels(**lb).observe(v)
        if prompt:
            self.prompt.labels(**lb).inc(prompt)
        if generation:
            self.generation.labels(**lb).inc(generation)
        if cached > 0:
            self.cached.labels(**lb).inc(cached)
        self.cached_per_request.labels(**lb).observe(cached)

    def iteration(self, stats):
        """One drained iteration's statistics, as log_iteration_stats records them."""
        lb = self.labels
        for g, group, field in self.gauges:
            src = stats if group is None else stats.get(group) or {}
            if field in src:
                g.labels(**lb).set(src[field])
        if stats.get("numCompletedRequests", 0) > 0:
            self.completed.labels(**lb).inc(stats["numCompletedRequests"])
        if "iterLatencyMS" in stats:
            self.iter_latency.labels(**lb).set(stats["iterLatencyMS"] / 1000.0)
        kv = stats.get("kvCacheStats") or {}
        if "cacheHitRate" in kv:
            self.hit_rate.labels(**lb).set(kv["cacheHitRate"])
        if "reusedBlocks" in kv:
            if kv["reusedBlocks"] > self.prev_reused:
                self.reused.labels(**lb).inc(kv["reusedBlocks"] - self.prev_reused)
            self.prev_reused = kv["reusedBlocks"]
        if "missedBlocks" in kv:
            if kv["missedBlocks"] > self.prev_missed:
                self.missed.labels(**lb).inc(kv["missedBlocks"] - self.prev_missed)
            self.prev_missed = kv["missedBlocks"]
        if kv.get("maxNumBlocks") and "usedNumBlocks" in kv:
            self.utilization.labels(**lb).set(kv["usedNumBlocks"] / kv["maxNumBlocks"])
        ifb = stats.get("inflightBatchingStats") or {}
        if ifb.get("numCtxTokens", 0) > 0:
            self.ctx_tokens.labels(**lb).observe(ifb["numCtxTokens"])
        if ifb and stats.get("maxNumActiveRequests", 0) > 0:
            self.occupancy.labels(**lb).set(ifb.get("numContextRequests", 0) / stats["maxNumActiveRequests"])
        spec = stats.get("specDecodingStats") or {}
        if spec.get("numDraftTokens", 0) > 0:
            self.drafts.labels(**lb).inc(spec["numDraftTokens"])
        if spec.get("numAcceptedTokens", 0) > 0:
            self.accepted.labels(**lb).inc(spec["numAcceptedTokens"])

    def config_info(self, model, parallel, speculative=None, kv_cache=None):
        """log_config_info: one gauge per configuration, 1, its configuration as labels."""
        for name, doc, cfg in (("model_config_info", "Model configuration info", model),
                               ("parallel_config_info", "Parallelism configuration info", parallel),
                               ("speculative_config_info", "Speculative decoding configuration info", speculative),
                               ("kv_cache_config_info", "KV cache configuration info", kv_cache)):
            if cfg:
                ls = {**self.labels, **cfg}
                Gauge(self.p + name, doc, list(ls)).labels(**ls).set(1)
