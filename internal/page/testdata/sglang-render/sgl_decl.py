"""SGLang's metric families, declared as python/sglang/srt/observability/metrics_collector.py
declares them (names, HELP texts, label names, buckets, multiprocess modes): the scheduler's and
the tokenizer's collectors, the families a server with metrics on has. Written from reading
that file; values are set by the callers."""
from prometheus_client import Counter, Gauge, Histogram

# SGLang's gauges are multiprocess_mode=MOSTRECENT, which Debian's prometheus_client (0.16)
# predates; "max" renders the same (one series per label set, no pid) when one process writes
# each series, as here.
MOSTRECENT = "max"

def exponential_buckets(start, width, length):
    b = []
    for i in range(length):
        b.append(start * (width ** i))
    return b

QUEUE = [0.000, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
         200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]
TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400]
ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
       0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]
PROMPT = [100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12500, 15000, 17500,
          20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000, 600000,
          800000, 1000000, 1100000]

SCHED_GAUGES = [
    ("num_running_reqs", "The number of running requests."),
    ("num_queue_reqs", "The number of requests in the waiting queue."),
    ("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue."),
    ("gen_throughput", "The generation throughput (token/s)."),
    ("cache_hit_rate", "The prefix cache hit rate."),
    ("decode_sum_seq_lens", "The sum of all sequence lengths in decode."),
    ("token_usage", "The token usage."),
    ("full_token_usage", "The token usage for full attention layers."),
    ("swa_token_usage", "The token usage for SWA layers."),
    ("mamba_usage", "The token usage for Mamba layers."),
    ("num_used_tokens", "The number of used tokens."),
    ("kv_available_tokens", "Number of free token slots in the KV cache pool."),
    ("kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool."),
    ("kv_used_tokens", "Number of actively used token slots in the KV cache pool."),
    ("spec_accept_length", "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward)."),
    ("spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."),
    ("utilization", "The utilization."),
    ("new_token_ratio", "The new token ratio."),
    ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
    ("context_len", "Maximum context length."),
]
QUEUE_COUNT = {"num_running_reqs", "num_queue_reqs"}


class Scheduler:
    def __init__(self, labels):
        self.labels = labels
        ln = list(labels.keys())
        self.g = {n: Gauge("sglang:" + n, h, labelnames=ln, multiprocess_mode=MOSTRECENT) for n, h in SCHED_GAUGES}
        self.retracted_reqs = Gauge("sglang:num_retracted_reqs", "The number of retracted requests.", labelnames=ln)
        self.paused_reqs = Gauge("sglang:num_paused_reqs", "The number of paused requests by async weight sync.", labelnames=ln)
        self.retracted = Counter("sglang:num_retracted_requests_total", "Total number of retracted requests.", labelnames=ln)
        self.retracted_in = Counter("sglang:num_retracted_input_tokens_total", "Total number of retracted input tokens.", labelnames=ln)
        self.retracted_out = Counter("sglang:num_retracted_output_tokens_total", "Total number of retracted output tokens.", labelnames=ln)
        self.realtime = Counter("sglang:realtime_tokens_total",
                                "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
                                labelnames=ln + ["mode"])
        self.effective = Counter("sglang:prefill_effective_tokens_total",
                                 "Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. mode: device_hit, "
                                 "host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / rate(sum of all modes); "
                                 "per-tier rate uses a single *_hit mode in the numerator.",
                                 labelnames=ln + ["mode"])
        for mode in ("input", "device_hit", "host_hit", "storage_hit"):
            self.effective.labels(**labels, mode=mode)
        self.fwd = Counter("sglang:forward_execution_seconds_total",
                           "Total time that GPU is busy executing model forward passes. Refer to ForwardMode for category labels.",
                           labelnames=ln + ["category"])
        self.weight_load = Gauge("sglang:weight_load_duration_seconds",
                                 "Wall time of the most recent update_weights_from_<source> call on this scheduler rank (seconds). "
                                 "`source` label is one of: disk, distributed, tensor, ipc. Event-detection via "
                                 "changes(...[<range>]) > 0 — no separate counter needed.",
                                 labelnames=ln + ["source"], multiprocess_mode=MOSTRECENT)
        self.queue = Histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", labelnames=ln, buckets=QUEUE)
        self.stage = Histogram("sglang:per_stage_req_latency_seconds", "The latency of each stage of requests.",
                               buckets=exponential_buckets(0.001, 1.62, 30), labelnames=ln + ["stage"])
        self.known_priorities = set()

    def log_stats(self, values, by_priority=None):
        for n, _ in SCHED_GAUGES:
            self.g[n].labels(**self.labels).set(values.get(n, 0))
            if n in QUEUE_COUNT and by_priority is not None:
                self.known_priorities.update(by_priority[n].keys())
                for p in self.known_priorities:
                    l = dict(self.labels)
                    l["priority"] = str(p)
                    self.g[n].labels(**l).set(by_priority[n].get(p, 0))
        self.retracted_reqs.labels(**self.labels).set(values.get("num_retracted_reqs", 0))
        self.paused_reqs.labels(**self.labels).set(values.get("num_paused_reqs", 0))


class Tokenizer:
    def __init__(self, labels):
        self.labels = labels
        ln = list(labels.keys())
        self.prompt = Counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", labelnames=ln + ["is_streaming"])
        self.gen = Counter("sglang:generation_tokens_total", "Number of generation tokens processed.", labelnames=ln + ["is_streaming"])
        self.prompt_hist = Histogram("sglang:prompt_tokens_histogram", "Histogram of prompt token length.", labelnames=ln, buckets=PROMPT)
        self.gen_hist = Histogram("sglang:generation_tokens_histogram", "Histogram of generation token length.", labelnames=ln,
                                  buckets=PROMPT)
        self.verify = Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.", labelnames=ln)
        self.cached = Counter("sglang:cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage).",
                              labelnames=ln + ["cache_source"])
        self.requests = Counter("sglang:num_requests_total", "Number of requests processed.", labelnames=ln + ["is_streaming"])
        self.aborted = Counter("sglang:num_aborted_requests_total", "Number of requests aborted.", labelnames=ln)
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              labelnames=ln + ["is_streaming"], buckets=TTFT)
        self.itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labelnames=ln, buckets=ITL)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                             labelnames=ln + ["is_streaming"], buckets=E2E)

    def finished(self, prompt, gen, cached, e2e, ttft, streaming):
        sl = dict(self.labels, is_streaming="true" if streaming else "false")
        self.ttft.labels(**sl).observe(ttft)
        self.prompt.labels(**sl).inc(prompt)
        self.gen.labels(**sl).inc(gen)
        if cached > 0:
            self.cached.labels(**self.labels, cache_source="device").inc(cached)
        self.requests.labels(**sl).inc(1)
        self.e2e.labels(**sl).observe(e2e)
        self.prompt_hist.labels(**self.labels).observe(prompt)
        self.gen_hist.labels(**self.labels).observe(gen)
