"""A plain training loop with vllmstat as a sidecar.

Try it against a simulated fleet (no GPU), which serves vLLM's OpenAI API and only generates
what the loop asks for:

    vllmstat sim --workload none --servers 2 --dp 2 --port 8100 &
    vllmstat run --target 127.0.0.1:8100 --target 127.0.0.1:8101 --step-every 0 --interval 0.5 &
    python3 examples/plain_loop.py

With real vLLM servers, point --target at their /metrics (one per API server; data-parallel
engines behind one server show up as separate workers) and $VLLM_URLS at the same servers.
Each step prints the tokens of the answers' `usage`, which on the simulator are exactly the
rollout and eval phases' vllm/prompt_tokens and vllm/generation_tokens (vLLM's own usage counts
a prompt once per request, its counters once per sample).
"""

import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from vllmstat_client import Client, scalars  # noqa: E402  (or pip install ./clients/python)

# The engines' OpenAI servers, comma-separated.
ENGINES = os.environ.get("VLLM_URLS", "http://127.0.0.1:8100,http://127.0.0.1:8101").split(",")
SYSTEM = "You are a careful solver. Think step by step and give the final answer at the end."


def complete(engine, prompt, n, max_tokens):
    """One request to an engine's /v1/completions; its usage."""
    body = json.dumps({"prompt": prompt, "n": n, "max_tokens": max_tokens}).encode()
    req = urllib.request.Request(engine.rstrip("/") + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.load(resp)["usage"]


def generate(questions, n, max_tokens):
    """Samples n answers to each question, the questions spread over the engines, all at once;
    the summed usage: {"prompt_tokens": ..., "completion_tokens": ...}."""
    with ThreadPoolExecutor(max_workers=len(questions)) as pool:
        usages = list(pool.map(lambda iq: complete(ENGINES[iq[0] % len(ENGINES)], SYSTEM + " " + iq[1], n, max_tokens),
                               enumerate(questions)))
    return {k: sum(u[k] for u in usages) for k in ("prompt_tokens", "completion_tokens")}


def generate_rollouts(step):
    # a GRPO-style batch: 8 questions, 4 samples each (a group shares its prompt's KV cache)
    return generate(["Question %d of step %d: what is %d times %d?" % (i, step, i + 3, step + 7) for i in range(8)], 4, 64)


def train(step):
    time.sleep(0.5)  # stands in for the policy update


def validate(step):
    # the same held-out questions every time
    return generate(["Held-out question %d: name a prime above %d." % (i, 10 * i) for i in range(4)], 2, 32)


def main():
    vs = Client()  # http://127.0.0.1:9400; never raises: an unreachable sidecar gives {}
    for step in range(1, 6):
        with vs.phase("rollout"):  # the engines' work in here is also counted apart
            rollout = generate_rollouts(step)
        train(step)
        usage = "rollout usage %d prompt + %d completion tokens" % (rollout["prompt_tokens"], rollout["completion_tokens"])
        if step % 2 == 0:
            with vs.phase("eval"):
                val = validate(step)
            usage += ", eval usage %d prompt + %d completion tokens" % (val["prompt_tokens"], val["completion_tokens"])
        record = vs.end_step(step)  # the step's vLLM metrics, scraped right now from every engine
        metrics = {"train/step": step}
        metrics.update(scalars(record))  # the step's keys, and each phase's: "vllm/rollout/..."
        print("step %d: %s; prefix-cache hit rate %s (rollout %s), preemptions %s, KV usage max %s" % (
            step, usage,
            metrics.get("vllm/prefix_cache_hit_rate", "-"),
            metrics.get("vllm/rollout/prefix_cache_hit_rate", "-"),
            metrics.get("vllm/num_preemptions", "-"),
            metrics.get("vllm/kv_cache_usage_perc/max", "-")), flush=True)
        # wandb.log(metrics, step=step), or log_to(run, record)


if __name__ == "__main__":
    main()
