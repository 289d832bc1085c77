"""Renders two Ray Serve LLM replicas running SGLang (>= 0.5.15, metrics through Ray) as Ray's
metrics agent serves them: prometheus_client's text rendering of a collector of Ray's metrics,
SGLang's names with ':' made '_' and Ray's "ray_" prefix, Ray's tags beside SGLang's labels."""
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
import sgl_decl

SESSION = "session_2026-11-30_09-12-44_118273_4410"
REPLICAS = [("k7qz2m1d", "5f1c0a9e3b7d2c4e8a6f0b1d3c5e7a9b2d4f6a8c0e1b3d5f7a9c2e4b", 1),
            ("p3xw9c4e", "a2e4c6b8d0f1a3c5e7b9d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5", 2)]
MODEL = "Qwen/Qwen3-8B"

def tags(rid, wid, extra):
    t = {"Component": "core_worker", "NodeAddress": "10.0.0.5", "ReplicaId": rid, "SessionName": SESSION,
         "Version": "2.52.0", "WorkerId": wid, "model_name": MODEL, "engine_type": "unified"}
    t.update(extra)
    return t

SCHED = {"tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}

class RayCollector:
    def collect(self):
        cpu = GaugeMetricFamily("ray_node_cpu_utilization", "Total CPU usage on a ray node", labels=["NodeAddress", "SessionName", "Version", "ip"])
        cpu.add_metric(["10.0.0.5", SESSION, "2.52.0", "10.0.0.5"], 41.5)
        yield cpu
        gauges = {"num_running_reqs": lambda k: 3 * k, "num_queue_reqs": lambda k: k, "token_usage": lambda k: 0.21 * k,
                  "gen_throughput": lambda k: 800.5 * k, "num_used_tokens": lambda k: 4096 * k, "num_paused_reqs": lambda k: 0,
                  "spec_accept_length": lambda k: 0}
        helps = dict(sgl_decl.SCHED_GAUGES)
        helps["num_paused_reqs"] = "The number of paused requests by async weight sync."
        for name, f in gauges.items():
            keys = list(tags("", "", SCHED).keys())
            g = GaugeMetricFamily("ray_sglang_" + name, helps[name], labels=keys)
            for rid, wid, k in REPLICAS:
                g.add_metric(list(tags(rid, wid, SCHED).values()), f(k))
            yield g
        for name, help, extra, f in [
            ("prompt_tokens", "Number of prefill tokens processed.", {"is_streaming": "false"}, lambda k: 1024 * 40 * k),
            ("generation_tokens", "Number of generation tokens processed.", {"is_streaming": "false"}, lambda k: 300 * 40 * k),
            ("cached_tokens", "Number of cached prompt tokens by source (device/host/storage).", {"cache_source": "device"}, lambda k: 512 * 40 * k),
            ("num_requests", "Number of requests processed.", {"is_streaming": "false"}, lambda k: 40 * k),
            ("num_retracted_requests", "Total number of retracted requests.", SCHED, lambda k: 2 * k),
        ]:
            keys = list(tags("", "", extra).keys())
            c = CounterMetricFamily("ray_sglang_" + name, help, labels=keys)
            for rid, wid, k in REPLICAS:
                c.add_metric(list(tags(rid, wid, extra).values()), f(k))
            yield c
        keys = list(tags("", "", dict(SCHED, mode="")).keys())
        c = CounterMetricFamily("ray_sglang_realtime_tokens",
                                "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
                                labels=keys)
        for rid, wid, k in REPLICAS:
            for mode, n in (("prefill_compute", 20480), ("prefill_cache", 20480), ("decode", 12000)):
                c.add_metric(list(tags(rid, wid, dict(SCHED, mode=mode)).values()), n * k)
        yield c
        for name, help, bounds, extra, obs in [
            ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", sgl_decl.TTFT, {"is_streaming": "false"}, 0.35),
            ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", sgl_decl.E2E, {"is_streaming": "false"}, 5.5),
            ("queue_time_seconds", "Histogram of queueing time in seconds.", sgl_decl.QUEUE, SCHED, 0.02),
        ]:
            keys = list(tags("", "", extra).keys())
            h = HistogramMetricFamily("ray_sglang_" + name, help, labels=keys)
            for rid, wid, k in REPLICAS:
                n = 40 * k
                buckets = [(repr(float(b)), n if obs <= b else 0) for b in bounds] + [("+Inf", n)]
                h.add_metric(list(tags(rid, wid, extra).values()), buckets, obs * n)
            yield h

reg = CollectorRegistry()
reg.register(RayCollector())
print(generate_latest(reg).decode(), end="")
