"""The TensorRT-LLM fixture pages. Run from this directory with Debian's python3-prometheus-client:

    /usr/bin/python3 scenarios.py

It writes ../prometheus-client-render-trtllm-{fresh,serve,dynamo-colon}.prom and
../../../step/testdata/trtllm-step-{a,b}.prom with trtllm-step-want.json, what a step between
those two pages holds, computed here from the second batch's requests and iterations alone."""
import json
import sys

from render import LABELS, render_pages

CONFIG = dict(model={"model": "Qwen/Qwen3-8B", "served_model_name": "Qwen3-8B", "dtype": "auto", "quantization": "none"},
              parallel={"tensor_parallel_size": "1", "pipeline_parallel_size": "1", "context_parallel_size": "1",
                        "gpu_count": "1"},
              kv_cache={"enable_block_reuse": "True", "free_gpu_memory_fraction": "0.9"})


def request(i, reason="stop", prompt=1024, gen=256, cached=512):
    """The figures of one finished request: reason, prompt, generation, cached tokens, then the
    e2e, TTFT, TPOT, queue, prefill, decode and inference seconds."""
    ttft, tpot, queue = 0.08 + 0.01 * i, 0.02, 0.001 * i
    decode = tpot * (gen - 1)
    return (reason, prompt, gen, cached, queue + ttft + decode, ttft, tpot, queue, ttft - queue, decode, ttft - queue + decode)


def iteration(running, waiting, used, paused=0, reused=0, missed=0, drafts=0, accepted=0, completed=0):
    return {"numActiveRequests": running, "numQueuedRequests": waiting, "numCompletedRequests": completed,
            "maxNumActiveRequests": 64, "iterLatencyMS": 25.0, "gpuMemUsage": 70e9, "cpuMemUsage": 0, "pinnedMemUsage": 0,
            "maxBatchSizeStatic": 64, "maxBatchSizeRuntime": 64, "maxNumTokensRuntime": 8192,
            "kvCacheStats": {"maxNumBlocks": 4000, "freeNumBlocks": 4000 - used, "usedNumBlocks": used, "tokensPerBlock": 32,
                             "reusedBlocks": reused, "missedBlocks": missed, "cacheHitRate": reused / max(reused + missed, 1)},
            "inflightBatchingStats": {"numScheduledRequests": running, "numContextRequests": 1, "numGenRequests": running - 1,
                                      "numPausedRequests": paused, "numCtxTokens": 512, "avgNumDecodedTokensPerIter": 1.0},
            "specDecodingStats": {"numDraftTokens": drafts, "numAcceptedTokens": accepted, "acceptanceLength": 2.5,
                                  "draftOverhead": 0.1}}


def fresh(decl, page):
    c = decl.Collector(LABELS)
    c.config_info(**CONFIG)
    return page()


def serve(prefix):
    def run(decl, page):
        c = decl.Collector(LABELS, prefix=prefix)
        c.config_info(**CONFIG)
        for i, reason in enumerate(["stop", "stop", "length"]):
            c.finished(*request(i, reason, gen=256 + i))
        c.iteration(iteration(3, 2, 1000, paused=1, reused=40, missed=60, drafts=300, accepted=180, completed=3))
        return page()
    return run


# The step: batch a before the step's first page, batch b between its two pages.
BATCH_A = [request(i, "stop" if i % 3 else "length", prompt=1000 + i, gen=200 + i, cached=400) for i in range(6)]
BATCH_B = [request(i, ("stop", "length", "stop", "stop")[i % 4], prompt=2000 + 10 * i, gen=300 + 7 * i, cached=1200 + i)
           for i in range(8)]
ITER_A = [iteration(6, 0, 800, reused=30, missed=70, drafts=500, accepted=350)]
ITER_B = [iteration(8, 3, 1500, paused=2, reused=130, missed=170, drafts=900, accepted=500),
          iteration(5, 1, 1200, paused=1, reused=180, missed=220, drafts=1300, accepted=700)]


def step(decl, page):
    c = decl.Collector(LABELS)
    c.config_info(**CONFIG)
    for r in BATCH_A:
        c.finished(*r)
    for s in ITER_A:
        c.iteration(s)
    a = page()
    for r in BATCH_B:
        c.finished(*r)
    for s in ITER_B:
        c.iteration(s)
    return [a, page()]


def want():
    """What the step between the two pages holds, from batch b's requests and iterations and
    the gauges of the pages' last drained iterations."""
    reasons = {}
    for r in BATCH_B:
        reasons[r[0]] = reasons.get(r[0], 0) + 1
    prompt, gen, cached = (sum(r[k] for r in BATCH_B) for k in (1, 2, 3))
    last_a, last_b = ITER_A[-1], ITER_B[-1]
    drafts = sum(s["specDecodingStats"]["numDraftTokens"] for s in ITER_B)
    accepted = sum(s["specDecodingStats"]["numAcceptedTokens"] for s in ITER_B)
    w = {
        "trtllm/prompt_tokens": prompt,
        "trtllm/generation_tokens": gen,
        "trtllm/cached_tokens": cached,
        "trtllm/prefix_cache_hit_rate": cached / prompt,
        "trtllm/finished_requests": len(BATCH_B),
        "trtllm/truncated_fraction": reasons["length"] / len(BATCH_B),
        "trtllm/spec_decode_num_draft_tokens": drafts,
        "trtllm/spec_decode_num_accepted_tokens": accepted,
        "trtllm/spec_decode_acceptance_rate": accepted / drafts,
    }
    for reason, n in reasons.items():
        w["trtllm/request_success/" + reason] = n
    for key, fa, fb in (("num_requests_running", last_a["numActiveRequests"], last_b["numActiveRequests"]),
                        ("num_requests_waiting", last_a["numQueuedRequests"], last_b["numQueuedRequests"]),
                        ("kv_cache_usage_perc", last_a["kvCacheStats"]["usedNumBlocks"] / 4000,
                         last_b["kvCacheStats"]["usedNumBlocks"] / 4000),
                        ("num_paused_requests", last_a["inflightBatchingStats"]["numPausedRequests"],
                         last_b["inflightBatchingStats"]["numPausedRequests"])):
        w["trtllm/" + key + "/mean"] = (fa + fb) / 2
        w["trtllm/" + key + "/max"] = max(fa, fb)
    for key, k in (("e2e_request_latency_seconds", 4), ("time_to_first_token_seconds", 5),
                   ("request_time_per_output_token_seconds", 6), ("request_queue_time_seconds", 7),
                   ("request_prefill_time_seconds", 8), ("request_decode_time_seconds", 9),
                   ("request_inference_time_seconds", 10)):
        obs = [r[k] for r in BATCH_B if r[k] or k == 7]
        w["trtllm/" + key + "/mean"] = sum(obs) / len(obs)
    return w


if __name__ == "__main__":
    out = {"../prometheus-client-render-trtllm-fresh.prom": render_pages(fresh),
           "../prometheus-client-render-trtllm-serve.prom": render_pages(serve("trtllm_")),
           "../prometheus-client-render-trtllm-dynamo-colon.prom": render_pages(serve("trtllm:"))}
    a, b = render_pages(step)
    out["../../../step/testdata/trtllm-step-a.prom"] = a
    out["../../../step/testdata/trtllm-step-b.prom"] = b
    out["../../../step/testdata/trtllm-step-want.json"] = json.dumps(want(), indent=1, sort_keys=True) + "\n"
    for path, text in out.items():
        with open(path, "w") as f:
            f.write(text)
    print("wrote", len(out), "files", file=sys.stderr)
