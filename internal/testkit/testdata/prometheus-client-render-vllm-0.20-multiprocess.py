"""Renders prometheus-client-render-vllm-0.20-multiprocess.prom: the /metrics page of a vLLM 0.20
server started with --api-server-count 2 and data parallelism 2, as prometheus_client's
multiprocess collector renders it.

With more than one API server, vLLM sets PROMETHEUS_MULTIPROC_DIR (vllm/v1/metrics/prometheus.py,
setup_multiprocess_prometheus) and serves a CollectorRegistry holding only a
MultiProcessCollector (get_prometheus_registry): no process or Python families, no _created
samples, counters and histograms summed over the API server processes, each gauge merged by
its multiprocess_mode. Each API server process runs its own PrometheusStatLogger
(vllm/v1/metrics/loggers.py) over both engines: it creates every child of its counters and
histograms at start-up, counts the requests it serves, and sets the scheduler gauges when
scheduler stats reach it.

vLLM declares its gauges multiprocess_mode="mostrecent": the merged page shows the value of the
latest set() over the processes, and a child no process has set yet (timestamp 0) not at all,
the family keeping its HELP and TYPE. Debian's prometheus_client (0.16) predates that mode, so
with it the gauges here are "max" gauges whose children a process creates only when it sets
them, and each child is set by one process: that renders what "mostrecent" renders. With a
prometheus_client that has the mode, the script uses it.

The collector reads the processes' files in glob order, which is the file system's; the script
reads them sorted, so that the page is the same at each run (counters, then gauges, then
histograms, each in the order their first child was written: the order vLLM creates them, but
for the gauges that the stand-in for "mostrecent" creates only when it sets them). prometheus_client 0.16 lists a histogram's
_sum samples before its buckets; later versions list each child's _sum, buckets and _count
together.

Run from the repository root with the system's Python and its prometheus_client (Debian's
python3-prometheus-client):
    python3 internal/testkit/testdata/prometheus-client-render-vllm-0.20-multiprocess.py
"""

import glob
import multiprocessing
import os
import sys
import tempfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "prometheus-client-render-vllm-0.20-multiprocess.prom")
MODEL = "Qwen/Qwen3-1.7B"
ENGINES = ("0", "1")
LABELS = ["model_name", "engine"]
MAX_MODEL_LEN = 4096


def buckets_125(limit):
    out, p = [], 1
    while True:
        for m in (1, 2, 5):
            if m * p > limit:
                return out
            out.append(m * p)
        p *= 10


TOKENS = buckets_125(MAX_MODEL_LEN)
REQUEST_PHASE = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
PER_TOKEN = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0]
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITERATION = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
# prometheus-fastapi-instrumentator computes its "highr" bounds by multiplication (0.35000000000000003).
HTTP_HIGHR = [i * 0.01 for i in range(1, 60)] + [1, 2, 5, 10, 30, 60]

WAITING_HELP = ("Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
                "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA "
                "budget, KV transfer, blocked status). Sum of all reasons equals "
                "vllm:num_requests_waiting.")
SLEEP_HELP = ("Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
              "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.")

# What each API server process saw, per engine: its requests' counts, and the scheduler gauges
# it set last (None: the engine's scheduler stats last reached the other process, or none yet).
# Engine 1 has had no request: no process has set its scheduler gauges.
PROCESSES = [
    {"0": dict(requests=3, prompt=1200, cached=512, gen=300, preempt=1, queries=1200, hits=512,
               gauges=dict(running=2, capacity=1, deferred=0, kv=0.25)),
     "1": dict(requests=0, prompt=0, cached=0, gen=0, preempt=0, queries=0, hits=0, gauges=None)},
    {"0": dict(requests=2, prompt=800, cached=256, gen=200, preempt=0, queries=800, hits=256,
               gauges=None),
     "1": dict(requests=0, prompt=0, cached=0, gen=0, preempt=0, queries=0, hits=0, gauges=None)},
]


def api_server(index, directory):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import Counter, Gauge, Histogram

    def gauge(name, doc, labels):
        try:
            g = Gauge(name, doc, labels, multiprocess_mode="mostrecent")
            return g, g.labels
        except ValueError:  # prometheus_client before 0.17: see the module's comment
            g = Gauge(name, doc, labels, multiprocess_mode="max")
            return g, g.labels

    def per_engine(metric):
        return {e: metric.labels(MODEL, e) for e in ENGINES}

    running, running_child = gauge("vllm:num_requests_running", "Number of requests in model execution batches.", LABELS)
    waiting, waiting_child = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", LABELS)
    by_reason, by_reason_child = gauge("vllm:num_requests_waiting_by_reason", WAITING_HELP, LABELS + ["reason"])
    sleep, sleep_child = gauge("vllm:engine_sleep_state", SLEEP_HELP, LABELS + ["sleep_state"])
    # The logger creates the children state by state, then record_sleep_state() sets every
    # engine awake, in every process.
    children = {(s, e): sleep_child(MODEL, e, s) for s in ("awake", "weights_offloaded", "discard_all") for e in ENGINES}
    for state, value in (("discard_all", 0), ("weights_offloaded", 0), ("awake", 1)):
        for e in ENGINES:
            children[state, e].set(value)
    kv, kv_child = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", LABELS)

    def counter(name, doc, extra=None, values=()):
        c = Counter(name, doc, LABELS + ([extra] if extra else []))
        if extra:
            return {v: {e: c.labels(MODEL, e, v) for e in ENGINES} for v in values}
        return per_engine(c)

    queries = counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.")
    hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
    counter("vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector "
            "cross-instance cache sharing, in terms of number of queried tokens.")
    counter("vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector "
            "cross-instance cache sharing, in terms of number of cached tokens.")
    counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.")
    counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
    preempt = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
    prompt = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
    by_source = counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", "source",
                        ("local_compute", "local_cache_hit", "external_kv_transfer"))
    cached = counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
    gen = counter("vllm:generation_tokens", "Number of generation tokens processed.")
    success = counter("vllm:request_success", "Count of successfully processed requests.", "finished_reason",
                      ("stop", "length", "abort", "error", "repetition"))

    def histogram(name, doc, buckets):
        return per_engine(Histogram(name, doc, LABELS, buckets=buckets))

    req_prompt = histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKENS)
    req_gen = histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", TOKENS)
    histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION)
    histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", TOKENS)
    histogram("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
    histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", TOKENS)
    ttft = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT)
    histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", PER_TOKEN)
    histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", PER_TOKEN)
    e2e = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_PHASE)
    histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", REQUEST_PHASE)
    histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", REQUEST_PHASE)
    histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", REQUEST_PHASE)
    histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", REQUEST_PHASE)
    kv_computed = histogram("vllm:request_prefill_kv_computed_tokens",
                            "Histogram of new KV tokens computed during prefill (excluding cached tokens).", TOKENS)

    # log_engine_initialized(): the cache config, one child per engine.
    info, info_child = gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                             ["block_size", "cache_dtype", "enable_prefix_caching", "engine",
                              "gpu_memory_utilization", "num_gpu_blocks"])
    for e in ENGINES:
        info_child("16", "auto", "True", e, "0.9", "46080").set(1)

    # The HTTP instrumentation (prometheus-fastapi-instrumentator): the duration histogram has
    # no labels, so it exists from start-up; a handler's counter child comes with its first
    # request.
    http = Counter("http_requests", "Total number of requests by method, status and handler.",
                   ["handler", "method", "status"])
    highr = Histogram("http_request_duration_highr_seconds", "Latency with many buckets but no API "
                      "specific labels. Made for more accurate percentile calculations. ",
                      buckets=HTTP_HIGHR)

    served = 0
    for e, seen in PROCESSES[index].items():
        n = seen["requests"]
        served += n
        queries[e].inc(seen["queries"])
        hits[e].inc(seen["hits"])
        preempt[e].inc(seen["preempt"])
        prompt[e].inc(seen["prompt"])
        by_source["local_compute"][e].inc(seen["prompt"] - seen["cached"])
        by_source["local_cache_hit"][e].inc(seen["cached"])
        cached[e].inc(seen["cached"])
        gen[e].inc(seen["gen"])
        success["stop"][e].inc(n)
        for _ in range(n):
            req_prompt[e].observe(seen["prompt"] / n)
            req_gen[e].observe(seen["gen"] / n)
            kv_computed[e].observe((seen["prompt"] - seen["cached"]) / n)
            ttft[e].observe(0.05)
            e2e[e].observe(1.2)
        g = seen["gauges"]
        if g is not None:
            running_child(MODEL, e).set(g["running"])
            waiting_child(MODEL, e).set(g["capacity"] + g["deferred"])
            by_reason_child(MODEL, e, "capacity").set(g["capacity"])
            by_reason_child(MODEL, e, "deferred").set(g["deferred"])
            kv_child(MODEL, e).set(g["kv"])
    if served:
        http.labels("/v1/completions", "POST", "2xx").inc(served)
        for _ in range(served):
            highr.observe(0.5)


def main():
    with tempfile.TemporaryDirectory() as directory:
        ctx = multiprocessing.get_context("spawn")
        for i in range(len(PROCESSES)):
            p = ctx.Process(target=api_server, args=(i, directory))
            p.start()
            p.join()
            if p.exitcode != 0:
                sys.exit(f"API server process {i} failed")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector

        class SortedCollector(MultiProcessCollector):
            def collect(self):
                return self.merge(sorted(glob.glob(os.path.join(self._path, "*.db"))), accumulate=True)

        registry = CollectorRegistry()
        SortedCollector(registry, directory)
        page = generate_latest(registry)
    with open(OUT, "wb") as f:
        f.write(page)


if __name__ == "__main__":
    main()
