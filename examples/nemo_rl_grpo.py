"""A NeMo-RL-style GRPO loop with the lines that log per-step vLLM metrics with vllmstat.

The loop has the shape of NeMo-RL's grpo_train: generate rollouts, train the policy, validate
every val_period steps, log on the trainer's own step axis. The policy, the generation, the
validation and the logger are stand-ins, so that this sketch runs anywhere, against a simulated
fleet (no GPU, no NeMo-RL):

    vllmstat sim --workload none --servers 2 --dp 2 --port 8100 &
    vllmstat run --config examples/grpo.yaml --target 127.0.0.1:8100 --target 127.0.0.1:8101 &
    python3 examples/nemo_rl_grpo.py

The generation stand-in drives the simulated engines as NeMo-RL drives colocated vLLM servers,
over their HTTP API: rollouts and validation through /v1/completions, a sleep while the policy
trains, and the refit (wake the weights, load the new ones, wake the KV cache) through vLLM's
sleep and dev-mode weight endpoints. So each phase holds exactly its requests' tokens: the
trainer's own count (the answers' `usage`, logged as rollout/prompt_tokens and
rollout/completion_tokens) is the phase's vllm/rollout/prompt_tokens and
vllm/rollout/generation_tokens (on the simulator; vLLM's own usage counts a prompt once per
request, its counters once per sample). $VLLM_URLS lists the engines' servers.

In NeMo-RL itself: keep the config's vllm_cfg logger keys, add the `vllmstat:` section of
examples/grpo.yaml (with the engines' /metrics URLs as `targets`, or register them at run time,
see below), start `vllmstat run --config <that file>` beside the trainer, and add the lines
marked "vllmstat" to grpo_train. Each phase edge and each step end takes a boundary scrape of
every engine (up to a second or two). The record holds the step's figures and each phase's
(`vllm/rollout/prefix_cache_hit_rate`, ...), so that validation rollouts do not blur the
training ones.
"""

import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from vllmstat_client import Client, scalars  # noqa: E402  (or pip install ./clients/python)


def grpo_train(policy, policy_generation, dataloader, val_dataloader, validate, logger, master_config):
    vs = Client()  # vllmstat 1: once; $VLLMSTAT_URL or http://127.0.0.1:9400, never raises
    # Engines created at run time: vs.add_targets(["http://%s:%d/metrics" % (ip, port), ...]);
    # engines inside the Ray actors, with no HTTP server, call expose() instead
    # (see nemo_rl_inprocess_worker.py).
    val_period = master_config["grpo"]["val_period"]
    for step, batch in enumerate(dataloader, start=1):
        with vs.phase("rollout"):  # vllmstat 2: around generation
            rollouts = policy_generation.generate(batch)
        policy_generation.finish_generation()  # colocated: the engines sleep while the policy trains
        train_metrics = policy.train(rollouts)  # in no phase
        vs.set_policy_version(step)  # vllmstat 3: the trainer has new weights, version `step`
        policy_generation.prepare_for_generation(weight_version=step)  # the refit
        if val_period > 0 and step % val_period == 0:
            with vs.phase("eval"):  # vllmstat 4: around validation
                val_metrics = validate(policy_generation, val_dataloader)
            logger.log_metrics(val_metrics, step, prefix="validation")
        record = vs.end_step(step)  # vllmstat 5: the step's record ({} if vllmstat is unreachable)
        metrics = dict(train_metrics)
        metrics.update(scalars(record))  # "vllm/...", "vllm/rollout/...", "vllm/eval/..."
        logger.log_metrics(metrics, step, prefix="train")


# Stand-ins for NeMo-RL's objects. The generation drives the engines' HTTP API as NeMo-RL's
# vLLM generation does with colocated servers; the policy's training only takes time.

ENGINES = os.environ.get("VLLM_URLS", "http://127.0.0.1:8100,http://127.0.0.1:8101").split(",")
# The chat template's system prompt that every prompt starts with, which the prefix cache keeps.
SYSTEM = ("You are a helpful assistant. Reason about the problem step by step, check each step, "
          "and put the final answer alone on the last line, after the words 'Final answer:'. "
          "Keep the reasoning short.")


def call(engine, path, body=None):
    """POSTs body (JSON) to one engine's server; its answer, parsed."""
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(engine.rstrip("/") + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        text = resp.read()
    return json.loads(text) if text else None


class HTTPGeneration:
    def generate(self, batch, questions=8, samples=4, max_tokens=64, tag="train"):
        """A GRPO batch: each question sampled `samples` times (one request, n samples, on one
        engine), the questions spread over the engines and sent at once. The rollouts' usage."""
        prompts = [SYSTEM + " Solve the %s problem %d of batch %d and show the steps." % (tag, i, batch)
                   for i in range(questions)]

        def one(i):
            body = {"prompt": prompts[i], "n": samples, "max_tokens": max_tokens}
            return call(ENGINES[i % len(ENGINES)], "/v1/completions", body)["usage"]
        with ThreadPoolExecutor(max_workers=questions) as pool:
            usages = list(pool.map(one, range(questions)))
        return {k: sum(u[k] for u in usages) for k in ("prompt_tokens", "completion_tokens")}

    def finish_generation(self):
        for e in ENGINES:
            call(e, "/sleep?level=1")

    def prepare_for_generation(self, weight_version):
        for e in ENGINES:
            call(e, "/wake_up?tags=weights")
            call(e, "/start_weight_update")
            call(e, "/finish_weight_update", {"weight_version": str(weight_version)})
            call(e, "/wake_up?tags=kv_cache")


class StandInPolicy:
    def train(self, rollouts):
        time.sleep(0.5)
        return {"loss": 0.1, "rollout/prompt_tokens": rollouts["prompt_tokens"],
                "rollout/completion_tokens": rollouts["completion_tokens"]}


def stand_in_validate(policy_generation, val_dataloader):
    usage = policy_generation.generate(0, questions=4, samples=2, max_tokens=32, tag="held-out")
    return {"accuracy": 0.5, "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]}


class PrintLogger:
    KEYS = ("vllm/prefix_cache_hit_rate", "vllm/rollout/prefix_cache_hit_rate", "vllm/num_preemptions",
            "vllm/rollout/generation_tokens_per_s", "vllm/eval/generation_tokens_per_s",
            "vllm/rollout/prompt_tokens", "vllm/rollout/generation_tokens", "vllm/eval/prompt_tokens",
            "vllm/eval/generation_tokens", "vllm/policy/version")

    def log_metrics(self, metrics, step, prefix=""):
        shown = {k: round(v, 4) for k, v in metrics.items() if k in self.KEYS or not k.startswith("vllm/")}
        print("%s step %d: %s" % (prefix, step, shown), flush=True)


if __name__ == "__main__":
    master_config = {"grpo": {"val_period": 2, "max_num_steps": 4}}  # NeMo-RL reads these from its YAML
    grpo_train(StandInPolicy(), HTTPGeneration(), range(master_config["grpo"]["max_num_steps"]), None,
               stand_in_validate, PrintLogger(), master_config)
