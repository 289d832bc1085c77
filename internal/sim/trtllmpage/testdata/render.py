"""Renders a trtllm-serve Prometheus page as prometheus_client's multiprocess collector serves
it, from TensorRT-LLM's declarations (tensorrt_llm/metrics/collector.py, MetricsCollector:
names, HELP texts, labels, buckets) and the rules by which it logs a finished request's figures
and the latest iteration statistics, restated here.

    python3 render.py > prometheus-client-render-trtllm.prom

The scenario is the one golden_test.go builds: the server starts (log_config_info), a request
finishes with reason stop, scheduled as it arrived, the iteration statistics are logged, a
second request finishes with reason length after one output token and a wait in the queue, the
statistics are logged again.
The multiprocess files are read in sorted order (counter, gauge, histogram) since the order in
which a directory lists them is the filesystem's, and the writing process is given pid 3000.
"""
import os, shutil, sys, tempfile

tmp = tempfile.mkdtemp()
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tmp

from prometheus_client import values  # noqa: E402

values.ValueClass = values.MultiProcessValue(lambda: 3000)

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402
import glob  # noqa: E402

LABELS = {"model_name": "Qwen/Qwen3-1.7B", "engine_type": "pytorch"}
L = list(LABELS)
P = "trtllm_"
PHASE = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
PREFILL = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]

# The collector's families, declared in its constructor's order.
success = Counter(P + "request_success_total", "Count of successfully processed requests.", L + ["finished_reason"])
e2e = Histogram(P + "e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", L, buckets=PHASE)
ttft = Histogram(P + "time_to_first_token_seconds", "Histogram of time to first token in seconds.", L, buckets=TTFT)
tpot = Histogram(P + "time_per_output_token_seconds", "Histogram of time per output token in seconds.", L, buckets=TPOT)
queue = Histogram(P + "request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", L, buckets=PHASE)
prefill = Histogram(P + "request_prefill_time_seconds",
                    "Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).", L, buckets=PREFILL)
decode = Histogram(P + "request_decode_time_seconds",
                   "Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).", L, buckets=PHASE)
inference = Histogram(P + "request_inference_time_seconds",
                      "Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).", L, buckets=PHASE)
prompt = Counter(P + "prompt_tokens_total", "Cumulative number of prompt (input) tokens processed.", L)
generation = Counter(P + "generation_tokens_total", "Cumulative number of generation (output) tokens produced.", L)
hit_rate = Gauge(P + "kv_cache_hit_rate", "KV cache hit rate", L)
reused = Counter(P + "kv_cache_reused_blocks", "Cumulative number of KV cache blocks reused (cache hits)", L)
missed = Counter(P + "kv_cache_missed_blocks", "Cumulative number of KV cache blocks missed (cache misses)", L)
utilization = Gauge(P + "kv_cache_utilization", "KV cache utilization", L)
running = Gauge(P + "num_requests_running", "Number of active requests", L)
waiting = Gauge(P + "num_requests_waiting", "Number of queued requests", L)
completed = Counter(P + "num_requests_completed_total", "Total number of completed requests across iterations", L)
max_active = Gauge(P + "max_num_active_requests", "Maximum number of active requests", L)
latency = Gauge(P + "iteration_latency_seconds", "Iteration latency in seconds", L)
gpu = Gauge(P + "gpu_memory_usage_bytes", "GPU memory usage in bytes", L)
cpu = Gauge(P + "cpu_memory_usage_bytes", "CPU memory usage in bytes", L)
pinned = Gauge(P + "pinned_memory_usage_bytes", "Pinned memory usage in bytes", L)
bs_static = Gauge(P + "max_batch_size_static", "Static maximum batch size", L)
bs_runtime = Gauge(P + "max_batch_size_runtime", "Runtime maximum batch size", L)
tokens_runtime = Gauge(P + "max_num_tokens_runtime", "Runtime maximum number of tokens", L)
max_blocks = Gauge(P + "kv_cache_max_blocks", "Maximum number of KV cache blocks", L)
free_blocks = Gauge(P + "kv_cache_free_blocks", "Number of free KV cache blocks", L)
used_blocks = Gauge(P + "kv_cache_used_blocks", "Number of used KV cache blocks", L)
per_block = Gauge(P + "kv_cache_tokens_per_block", "Number of tokens per KV cache block", L)
context = Gauge(P + "num_context_requests", "Number of context (prefill) requests", L)
gen_reqs = Gauge(P + "num_generation_requests", "Number of generation (decode) requests", L)
paused = Gauge(P + "num_paused_requests", "Number of paused requests", L)
scheduled = Gauge(P + "num_scheduled_requests", "Number of scheduled requests", L)
ctx_tokens = Gauge(P + "total_context_tokens", "Total number of context tokens", L)
decoded = Gauge(P + "avg_decoded_tokens_per_iter", "Average number of decoded tokens per iteration", L)
cached = Counter(P + "prompt_cached_tokens_total",
                 "Process-lifetime total prompt tokens served from KV cache. Resets only when the serving process restarts, "
                 "not when the KV cache is flushed or evicted.", L)
cached.labels(**LABELS)  # the one child the constructor makes
cached_per_request = Histogram(P + "prompt_cached_tokens_per_request", "Histogram of cached prompt tokens per request.", L,
                               buckets=[0, 64, 128, 256, 512, 1024, 2048, 4096, 8192])
occupancy = Gauge(P + "prefill_batch_occupancy", "Fraction of max active slots occupied by context requests.", L)
batch_tokens = Histogram(P + "prefill_batch_tokens", "Histogram of total context tokens per iteration.", L,
                         buckets=[64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768])


def info(name, doc, config):
    labels = {**LABELS, **config}
    Gauge(P + name, doc, list(labels)).labels(**labels).set(1)


# log_config_info at start, with trtllm-serve's defaults for the model.
info("model_config_info", "Model configuration info",
     {"model": "Qwen/Qwen3-1.7B", "served_model_name": "Qwen/Qwen3-1.7B", "dtype": "auto", "quantization": "none",
      "max_model_len": "4096", "gpu_type": "NVIDIA H100 80GB HBM3"})
info("parallel_config_info", "Parallelism configuration info",
     {"tensor_parallel_size": "1", "pipeline_parallel_size": "1", "context_parallel_size": "1", "gpu_count": "1"})
info("kv_cache_config_info", "KV cache configuration info",
     {"enable_block_reuse": "True", "enable_partial_reuse": "True", "free_gpu_memory_fraction": "0.9", "cache_dtype": "auto"})


def request(reason, m):
    """A finished request's log: latencies above 0 only, as the server keeps them, but the queue
    time, kept whatever its value."""
    success.labels(**LABELS, finished_reason=reason).inc()
    for h, k in ((e2e, "e2e"), (ttft, "ttft"), (tpot, "tpot"), (queue, "queue"), (prefill, "prefill"), (decode, "decode"),
                 (inference, "inference")):
        if m.get(k, 0) > 0 or (k == "queue" and k in m):
            h.labels(**LABELS).observe(m[k])
    if m["prompt"]:
        prompt.labels(**LABELS).inc(m["prompt"])
    if m["generation"]:
        generation.labels(**LABELS).inc(m["generation"])
    if m["cached"] > 0:
        cached.labels(**LABELS).inc(m["cached"])
    cached_per_request.labels(**LABELS).observe(m["cached"])


prev = {"reused": 0, "missed": 0}


def iteration(s):
    """An iteration's log: gauges set, counters raised by what grew."""
    running.labels(**LABELS).set(s["active"])
    waiting.labels(**LABELS).set(s["queued"])
    if s["completed"] > 0:
        completed.labels(**LABELS).inc(s["completed"])
    max_active.labels(**LABELS).set(48)
    latency.labels(**LABELS).set(s["latency_ms"] / 1000.0)
    gpu.labels(**LABELS).set(76_000_000_000)
    for g in (cpu, pinned, bs_static, bs_runtime, tokens_runtime):
        g.labels(**LABELS).set(0)
    hit_rate.labels(**LABELS).set(s["reused"] / (s["reused"] + s["missed"]) if s["reused"] else 0.0)
    for c, k in ((reused, "reused"), (missed, "missed")):
        if s[k] - prev[k] > 0:
            c.labels(**LABELS).inc(s[k] - prev[k])
        prev[k] = s[k]
    utilization.labels(**LABELS).set(s["used"] / 640)
    max_blocks.labels(**LABELS).set(640)
    free_blocks.labels(**LABELS).set(640 - s["used"])
    used_blocks.labels(**LABELS).set(s["used"])
    per_block.labels(**LABELS).set(16)
    context.labels(**LABELS).set(s["context"])
    gen_reqs.labels(**LABELS).set(s["generation"])
    paused.labels(**LABELS).set(s["paused"])
    scheduled.labels(**LABELS).set(s["context"] + s["generation"])
    ctx_tokens.labels(**LABELS).set(s["ctx_tokens"])
    if s["ctx_tokens"] > 0:
        batch_tokens.labels(**LABELS).observe(s["ctx_tokens"])
    decoded.labels(**LABELS).set(0)
    occupancy.labels(**LABELS).set(s["context"] / 48)


request("stop", {"e2e": 1.5, "ttft": 0.25, "tpot": 0.0625, "queue": 0.0, "prefill": 0.25, "decode": 1.25, "inference": 1.5,
                 "prompt": 100, "generation": 21, "cached": 64})
iteration({"active": 3, "queued": 1, "completed": 1, "latency_ms": 12.5, "reused": 4, "missed": 7, "used": 20,
           "context": 1, "generation": 2, "paused": 0, "ctx_tokens": 36})
request("length", {"e2e": 0.5, "ttft": 0.5, "queue": 0.125, "prefill": 0.375, "inference": 0.375,
                   "prompt": 50, "generation": 1, "cached": 0})
iteration({"active": 2, "queued": 0, "completed": 1, "latency_ms": 10.0, "reused": 4, "missed": 10, "used": 12,
           "context": 0, "generation": 2, "paused": 1, "ctx_tokens": 0})

registry = CollectorRegistry()


class SortedFiles(MultiProcessCollector):
    def collect(self):
        return self.merge(sorted(glob.glob(os.path.join(self._path, "*.db"))), accumulate=True)


SortedFiles(registry)
sys.stdout.write(generate_latest(registry).decode())
shutil.rmtree(tmp)
