"""Renders the pages of sglang-perstep-{a,b}.prom and their expected step values.

The families are declared with the names, types, HELP texts, labels and buckets of SGLang's
SchedulerMetricsCollector and TokenizerMetricsCollector
(python/sglang/srt/observability/metrics_collector.py): the retraction token counters, the
verify calls of speculative decoding, the effective prefill tokens by mode, the forward
execution seconds by category, the KV pool gauges and the PD disaggregation transfer families.
They are rendered as SGLang serves them, by prometheus_client's multiprocess collector, for a
server of two DP ranks (one scheduler each) and its tokenizer.

Run with Debian's python3-prometheus-client from this directory:
    /usr/bin/python3 sglang_perstep.py
It writes sglang-perstep-a.prom (after the first batch), sglang-perstep-b.prom (after the
second) and sglang-perstep-want.json: what a step between the two pages holds, computed here
from the second batch's increments alone.
"""
import json
import os
import shutil
import tempfile

mpdir = tempfile.mkdtemp()
os.environ["PROMETHEUS_MULTIPROC_DIR"] = mpdir

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest  # noqa: E402
from prometheus_client import multiprocess  # noqa: E402

# SGLang declares its gauges multiprocess_mode=MOSTRECENT, which this prometheus_client predates:
# "max" renders one process's gauge alike (no pid label, the value set).
MOSTRECENT = "mostrecent" if "mostrecent" in Gauge._MULTIPROC_MODES else "max"

sched = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank"]
tok = ["model_name", "engine_type"]


def sched_labels(dp):
    return dict(model_name="m", engine_type="prefill", tp_rank="0", pp_rank="0", moe_ep_rank="0", dp_rank=str(dp))


TOK = dict(model_name="m", engine_type="prefill")

retracted_in = Counter("sglang:num_retracted_input_tokens_total", "Total number of retracted input tokens.", sched)
retracted_out = Counter("sglang:num_retracted_output_tokens_total", "Total number of retracted output tokens.", sched)
effective = Counter(
    "sglang:prefill_effective_tokens_total",
    "Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. "
    "mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) "
    "/ rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.",
    sched + ["mode"],
)
forward = Counter(
    "sglang:forward_execution_seconds_total",
    "Total time that GPU is busy executing model forward passes. Refer to ForwardMode for category labels.",
    sched + ["category"],
)
kv_available = Gauge("sglang:kv_available_tokens", "Number of free token slots in the KV cache pool.", sched,
                     multiprocess_mode=MOSTRECENT)
kv_evictable = Gauge("sglang:kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool.",
                     sched, multiprocess_mode=MOSTRECENT)
kv_used = Gauge("sglang:kv_used_tokens", "Number of actively used token slots in the KV cache pool.", sched,
                multiprocess_mode=MOSTRECENT)
max_total = Gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", sched,
                  multiprocess_mode=MOSTRECENT)
latency = Histogram("sglang:kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", sched,
                    buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000))
speed = Histogram("sglang:kv_transfer_speed_gb_s", "Histogram of KV cache transfer speed in GB/s.", sched,
                  buckets=(0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400))
bootstrap_failed = Counter("sglang:num_bootstrap_failed_reqs_total", "The number of bootstrap failed requests.", sched)
transfer_failed = Counter("sglang:num_transfer_failed_reqs_total", "The number of transfer failed requests.", sched)
retries = Counter("sglang:num_prefill_retries_total", "Total number of prefill retries.", sched)

prompt = Counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", tok + ["is_streaming"])
generation = Counter("sglang:generation_tokens_total", "Number of generation tokens processed.", tok + ["is_streaming"])
verify = Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.", tok)

for dp in (0, 1):
    for mode in ("input", "device_hit", "host_hit", "storage_hit"):  # pre-seeded, as SGLang does
        effective.labels(**sched_labels(dp), mode=mode)
    max_total.labels(**sched_labels(dp)).set(100000)


def batch(k):
    """Applies batch k (1 or 2) and returns the step values it makes."""
    want = {}
    ins = [300 * k, 100 * k]
    outs = [50 * k, 20 * k]
    eff = {"input": [1000 * k, 800 * k], "device_hit": [600 * k, 200 * k], "host_hit": [100 * k, 0], "storage_hit": [0, 0]}
    fwd = {"forward_extend": [0.5 * k, 0.25 * k], "forward_decode": [2.0 * k, 1.5 * k]}
    lat = [[3, 40], [7 * k]]
    failed = [k, 0]
    for dp in (0, 1):
        ls = sched_labels(dp)
        retracted_in.labels(**ls).inc(ins[dp])
        retracted_out.labels(**ls).inc(outs[dp])
        for mode, v in eff.items():
            if v[dp] > 0:
                effective.labels(**ls, mode=mode).inc(v[dp])
        for cat, v in fwd.items():
            forward.labels(**ls, category=cat).inc(v[dp])
        kv_available.labels(**ls).set(90000 - 1000 * k - dp)
        kv_evictable.labels(**ls).set(5000 + 10 * k + dp)
        kv_used.labels(**ls).set(3000 * k + dp)
        for v in lat[dp]:
            latency.labels(**ls).observe(v)
            speed.labels(**ls).observe(12.0)
        if failed[dp]:
            bootstrap_failed.labels(**ls).inc(failed[dp])
            transfer_failed.labels(**ls).inc(failed[dp])
            retries.labels(**ls).inc(2 * failed[dp])
    prompt.labels(**TOK, is_streaming="false").inc(4000 * k)
    generation.labels(**TOK, is_streaming="false").inc(900 * k)
    generation.labels(**TOK, is_streaming="true").inc(300 * k)
    verify.labels(**TOK).inc(400 * k)

    total = sum(sum(v) for v in eff.values())
    want["sglang/num_retracted_input_tokens"] = sum(ins)
    want["sglang/num_retracted_output_tokens"] = sum(outs)
    want["sglang/recomputed_tokens"] = sum(ins) + sum(outs)
    for mode, v in eff.items():
        want["sglang/prefill_effective_tokens/" + mode] = sum(v)
        want["sglang/prefill_effective_share/" + mode] = sum(v) / total
    for cat, v in fwd.items():
        want["sglang/forward_execution_seconds/" + cat] = sum(v)
    want["sglang/spec_verify_calls"] = 400 * k
    want["sglang/spec_decode_mean_acceptance_length"] = (1200 * k) / (400 * k)
    want["sglang/num_bootstrap_failed_reqs"] = sum(failed)
    want["sglang/num_transfer_failed_reqs"] = sum(failed)
    want["sglang/num_prefill_retries"] = 2 * sum(failed)
    # a gauge's statistics are over every worker's samples: the last batch's are the largest
    want["sglang/kv_used_tokens/max"] = 3000 * k + 1
    want["sglang/max_total_num_tokens/mean"] = 100000
    want["sglang/kv_transfer_latency_ms/mean"] = sum(sum(x) for x in lat) / sum(len(x) for x in lat)
    want["sglang/kv_transfer_speed_gb_s/mean"] = 12.0
    return want


def render(path):
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    with open(path, "wb") as f:
        f.write(generate_latest(registry))


batch(1)
render("sglang-perstep-a.prom")
want = batch(2)
render("sglang-perstep-b.prom")
with open("sglang-perstep-want.json", "w") as f:
    json.dump(want, f, indent=1, sort_keys=True)
    f.write("\n")
shutil.rmtree(mpdir)
