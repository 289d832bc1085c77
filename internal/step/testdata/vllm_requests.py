"""Renders the pages of vllm-requests-{a,b}.prom and their expected step values.

The families are declared with the names, types, HELP texts and labels of vLLM's
PrometheusStatLogger (vllm/v1/metrics/loggers.py) and PerfMetricsProm (vllm/v1/metrics/perf.py):
the request-shape histograms (prompt and generation length, requested max tokens, prefill,
decode and running time, tokens per engine step), request_success by finished_reason,
prompt_tokens_by_source, recomputed_token_executions, the MFU counters of
--enable-mfu-metrics and the KV block residency histograms of --kv-cache-metrics. They are
rendered by prometheus_client for one API server of two engines (engine="0", "1").

Run with Debian's python3-prometheus-client from this directory:
    /usr/bin/python3 vllm_requests.py
It writes vllm-requests-a.prom (after the first batch), vllm-requests-b.prom (after the second)
and vllm-requests-want.json: what a step between the two pages holds, computed here from the
second batch alone. For a histogram's quantiles it gives the bounds of the bucket that holds the
true quantile of the batch's observations, which the step's estimate must fall in.
"""
import json
import math

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

reg = CollectorRegistry()
labels = ["model_name", "engine"]


def build_1_2_5(max_value):
    out, e = [], 0
    while True:
        for m in (1, 2, 5):
            if m * 10 ** e > max_value:
                return out
            out.append(m * 10 ** e)
        e += 1


LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
           960.0, 1920.0, 7680.0]
TOKENS = build_1_2_5(4096)  # max_model_len 4096
ITERATION = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
# --kv-cache-metrics' residency buckets span 0.001 s to 1800 s
RESIDENCY = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800]

hists = {
    "request_prompt_tokens": ("Number of prefill tokens processed.", TOKENS),
    "request_generation_tokens": ("Number of generation tokens processed.", TOKENS),
    "request_max_num_generation_tokens": ("Histogram of maximum number of requested generation tokens.", TOKENS),
    "request_prefill_time_seconds": ("Histogram of time spent in PREFILL phase for request.", LATENCY),
    "request_decode_time_seconds": ("Histogram of time spent in DECODE phase for request.", LATENCY),
    "request_inference_time_seconds": ("Histogram of time spent in RUNNING phase for request.", LATENCY),
    "iteration_tokens_total": ("Histogram of number of tokens per engine_step.", ITERATION),
    "kv_block_lifetime_seconds": ("Histogram of KV cache block lifetime from allocation to eviction.", RESIDENCY),
    "kv_block_idle_before_evict_seconds": ("Histogram of idle time before KV cache block eviction.", RESIDENCY),
    "kv_block_reuse_gap_seconds": ("Histogram of time gaps between consecutive KV cache block accesses.", RESIDENCY),
}
H = {name: Histogram("vllm:" + name, doc, labels, buckets=b, registry=reg) for name, (doc, b) in hists.items()}
success = Counter("vllm:request_success", "Count of successfully processed requests.", labels + ["finished_reason"],
                  registry=reg)
by_source = Counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", labels + ["source"], registry=reg)
prompt = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg)
recomputed = Counter("vllm:recomputed_token_executions", "Cumulative token positions executed again after preemption.",
                     labels, registry=reg)
flops = Counter("vllm:estimated_flops_per_gpu", "Estimated number of floating point operations per GPU (for Model Flops "
                "Utilization calculations).", labels, registry=reg)
read = Counter("vllm:estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory per GPU (for Model Flops "
               "Utilization calculations).", labels, registry=reg)
write = Counter("vllm:estimated_write_bytes_per_gpu", "Estimated number of bytes written to memory per GPU (for Model "
                "Flops Utilization calculations).", labels, registry=reg)
REASONS = ("stop", "length", "abort", "error", "repetition")
SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
for e in ("0", "1"):  # vLLM creates every reason's and source's child up front
    for r in REASONS:
        success.labels("m", e, r)
    for s in SOURCES:
        by_source.labels("m", e, s)


def requests(k, e):
    """Batch k's finished requests on engine e: (prompt, generated, max_tokens, reason, times)."""
    out = []
    for i in range(12 + 4 * e):
        p = 200 + 37 * i + 11 * k
        cap = 512
        g = min(cap, 90 + 53 * i * k)
        reason = "length" if g == cap else ("abort" if i % 7 == 3 else "stop")
        out.append((p, g, cap, reason, (0.05 + 0.01 * i, 0.4 + 0.3 * i, 0.45 + 0.31 * i)))
    return out


def batch(k):
    obs = {name: [] for name in hists}
    counts = {}
    for e in (0, 1):
        le = str(e)
        for p, g, cap, reason, (pre, dec, inf) in requests(k, e):
            for name, v in (("request_prompt_tokens", p), ("request_generation_tokens", g),
                            ("request_max_num_generation_tokens", cap), ("request_prefill_time_seconds", pre),
                            ("request_decode_time_seconds", dec), ("request_inference_time_seconds", inf)):
                H[name].labels("m", le).observe(v)
                obs[name].append(v)
            success.labels("m", le, reason).inc()
            counts[reason] = counts.get(reason, 0) + 1
            cached = (p // 16) * 16 // 2 if k > 1 else 0
            moved = 16 if e == 1 else 0
            by_source.labels("m", le, "local_cache_hit").inc(cached)
            by_source.labels("m", le, "external_kv_transfer").inc(moved)
            by_source.labels("m", le, "local_compute").inc(p - cached - moved)
            prompt.labels("m", le).inc(p)
            counts["prompt"] = counts.get("prompt", 0) + p
            counts["cached"] = counts.get("cached", 0) + cached
            counts["moved"] = counts.get("moved", 0) + moved
        for j in range(30):
            v = 64 * (j % 9) + 3 * k + e
            H["iteration_tokens_total"].labels("m", le).observe(v)
            obs["iteration_tokens_total"].append(v)
        for j in range(8):
            for name, v in (("kv_block_lifetime_seconds", 0.5 * j + k), ("kv_block_idle_before_evict_seconds", 0.1 * j),
                            ("kv_block_reuse_gap_seconds", 0.03 * (j + 1))):
                H[name].labels("m", le).observe(v)
                obs[name].append(v)
        recomputed.labels("m", le).inc(100 * k + e)
        flops.labels("m", le).inc(3e14 * k * (1 + e))
        read.labels("m", le).inc(2e12 * k)
        write.labels("m", le).inc(1e11 * k * (1 + e))

    want = {}
    finished = sum(counts.get(r, 0) for r in REASONS)
    want["vllm/finished_requests"] = finished
    want["vllm/truncated_fraction"] = counts.get("length", 0) / finished
    # No share of aborts is a key: vLLM itself never counts an aborted request in request_success.
    want["vllm/prompt_tokens"] = counts["prompt"]
    want["vllm/prompt_tokens_cached"] = counts["cached"]
    want["vllm/prompt_tokens_transferred"] = counts["moved"]
    want["vllm/prompt_tokens_computed"] = counts["prompt"] - counts["cached"] - counts["moved"]
    want["vllm/recomputed_tokens"] = 200 * k + 1
    # per GPU: the two engines' increases over two engines, over a step of 2 s
    want["vllm/achieved_tflops_per_gpu"] = 3e14 * k * 3 / 2 / 2 / 1e12
    want["vllm/achieved_read_gbps_per_gpu"] = 2e12 * k * 2 / 2 / 2 / 1e9
    want["vllm/achieved_write_gbps_per_gpu"] = 1e11 * k * 3 / 2 / 2 / 1e9
    buckets = {}
    for name, vs in obs.items():
        key = "vllm/" + name.replace("iteration_tokens_total", "iteration_tokens")
        want[key + "/mean"] = sum(vs) / len(vs)
        bounds = hists[name][1]
        vs = sorted(vs)
        for stat, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            # the observation at rank q*n is in the bucket whose cumulative count first reaches it
            v = vs[max(0, math.ceil(q * len(vs)) - 1)]
            i = next(j for j, b in enumerate(bounds) if v <= b)
            buckets[key + "/" + stat] = [bounds[i - 1] if i > 0 else 0, bounds[i]]
    return want, buckets


batch(1)
with open("vllm-requests-a.prom", "wb") as f:
    f.write(generate_latest(reg))
want, buckets = batch(2)
with open("vllm-requests-b.prom", "wb") as f:
    f.write(generate_latest(reg))
with open("vllm-requests-want.json", "w") as f:
    json.dump({"values": want, "buckets": buckets}, f, indent=1, sort_keys=True)
    f.write("\n")
