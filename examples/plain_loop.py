"""A plain training loop with vllmstat as a sidecar.

Try it against a simulated fleet (no GPU):

    vllmstat sim --servers 2 --dp 2 --port 8100 &
    vllmstat run --target 127.0.0.1:8100 --target 127.0.0.1:8101 --step-every 0 --interval 0.5 &
    python3 examples/plain_loop.py

With real vLLM servers, point --target at their /metrics (one per API server; data-parallel
engines behind one server show up as separate workers).
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from vllmstat_client import Client, scalars  # noqa: E402  (or copy vllmstat_client.py next to your trainer)


def generate_rollouts(step):
    time.sleep(3)  # stands in for sending a batch of prompts to the vLLM engines


def train(step):
    time.sleep(0.5)  # stands in for the policy update


def validate(step):
    time.sleep(1)  # stands in for validation rollouts on the same engines


def main():
    vs = Client()  # http://127.0.0.1:9400; never raises: an unreachable sidecar gives {}
    for step in range(1, 6):
        with vs.phase("rollout"):  # the engines' work in here is also counted apart
            generate_rollouts(step)
        train(step)
        if step % 2 == 0:
            with vs.phase("eval"):
                validate(step)
        record = vs.end_step(step)  # the step's vLLM metrics, scraped right now from every engine
        metrics = {"train/step": step}
        metrics.update(scalars(record))  # the step's keys, and each phase's: "vllm/rollout/..."
        print("step %d: prefix-cache hit rate %s (rollout %s), preemptions %s, KV usage max %s" % (
            step,
            metrics.get("vllm/prefix_cache_hit_rate", "-"),
            metrics.get("vllm/rollout/prefix_cache_hit_rate", "-"),
            metrics.get("vllm/num_preemptions", "-"),
            metrics.get("vllm/kv_cache_usage_perc/max", "-")))
        # wandb.log(metrics, step=step), or log_to(run, record)


if __name__ == "__main__":
    main()
