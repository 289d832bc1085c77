"""A NeMo-RL-style GRPO loop with the lines that log per-step vLLM metrics with vllmstat.

The loop has the shape of NeMo-RL's grpo_train: generate rollouts, train the policy, validate
every val_period steps, log on the trainer's own step axis. The policy, the generation, the
validation and the logger are stand-ins, so that this sketch runs anywhere, against a simulated
fleet (no GPU, no NeMo-RL):

    vllmstat sim --servers 2 --dp 2 --port 8100 &
    vllmstat run --config examples/grpo.yaml --target 127.0.0.1:8100 --target 127.0.0.1:8101 &
    python3 examples/nemo_rl_grpo.py

In NeMo-RL itself: keep the config's vllm_cfg logger keys, add the `vllmstat:` section of
examples/grpo.yaml (with the engines' /metrics URLs as `targets`, or register them at run time,
see below), start `vllmstat run --config <that file>` beside the trainer, and add the lines
marked "vllmstat" to grpo_train. Each phase edge and each step end takes a boundary scrape of
every engine (up to a second or two). The record holds the step's figures and each phase's
(`vllm/rollout/prefix_cache_hit_rate`, ...), so that validation rollouts do not blur the
training ones.
"""

import os
import sys
import time

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
        train_metrics = policy.train(rollouts)  # the engines sleep or idle: in no phase
        if val_period > 0 and step % val_period == 0:
            with vs.phase("eval"):  # vllmstat 3: around validation
                val_metrics = validate(policy_generation, val_dataloader)
            logger.log_metrics(val_metrics, step, prefix="validation")
        record = vs.end_step(step)  # vllmstat 4: the step's record ({} if vllmstat is unreachable)
        metrics = dict(train_metrics)
        metrics.update(scalars(record))  # "vllm/...", "vllm/rollout/...", "vllm/eval/..."
        logger.log_metrics(metrics, step, prefix="train")


# Stand-ins for NeMo-RL's objects. The simulated engines generate on their own schedule; here
# generation only takes time, as it would while the engines work.

class StandInGeneration:
    def generate(self, batch):
        time.sleep(2)
        return batch


class StandInPolicy:
    def train(self, rollouts):
        time.sleep(0.5)
        return {"loss": 0.1}


def stand_in_validate(policy_generation, val_dataloader):
    time.sleep(1)
    return {"accuracy": 0.5}


class PrintLogger:
    KEYS = ("vllm/prefix_cache_hit_rate", "vllm/rollout/prefix_cache_hit_rate", "vllm/num_preemptions",
            "vllm/rollout/generation_tokens_per_s", "vllm/eval/generation_tokens_per_s")

    def log_metrics(self, metrics, step, prefix=""):
        shown = {k: round(v, 4) for k, v in metrics.items() if k in self.KEYS or not k.startswith("vllm/")}
        print("%s step %d: %s" % (prefix, step, shown), flush=True)


if __name__ == "__main__":
    master_config = {"grpo": {"val_period": 2, "max_num_steps": 4}}  # NeMo-RL reads these from its YAML
    grpo_train(StandInPolicy(), StandInGeneration(), range(master_config["grpo"]["max_num_steps"]), None,
               stand_in_validate, PrintLogger(), master_config)
