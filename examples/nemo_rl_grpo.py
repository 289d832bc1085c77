"""The lines to add to a NeMo-RL-style GRPO loop to log per-step vLLM metrics with vllmstat.

NeMo-RL already has the keys (policy.generation.vllm_cfg):

    enable_vllm_metrics_logger: true
    vllm_metrics_logger_interval: 0.5
    vllm_metrics_log_scalars: true
    vllm_metrics_log_timeline_plots: false

Add a `vllmstat:` section with the engines' /metrics URLs (or set them at run time, see below)
and `step_every: 0`, and start the sidecar with the same config file:

    vllmstat run --config grpo.yaml &

This file is a sketch of the loop, not runnable NeMo-RL code: the three marked lines are what
changes.
"""

from vllmstat_client import Client, log_to

vs = Client()  # 1. once, before the loop


def grpo_train(policy, policy_generation, dataloader, logger, master_config):
    # 2. optional: engines are created at run time; tell vllmstat where they are
    #    (each vLLM API server's /metrics, e.g. from the Ray actors' IPs and ports)
    # vs.add_targets(["http://%s:%d/metrics" % (ip, port) for ip, port in engine_addresses])
    #    Engines inside the Ray actors, with no HTTP server, register themselves instead:
    #    see nemo_rl_inprocess_worker.py (expose() in the worker's __init__).
    for step, batch in enumerate(dataloader):
        rollouts = policy_generation.generate(batch)          # vLLM does its work here
        record = vs.end_step(step)                            # 3. right after generation
        metrics = {}
        metrics.update(record.get("metrics", {}))             # "vllm/prefix_cache_hit_rate", ...
        train_metrics = policy.train(rollouts)
        metrics.update(train_metrics)
        logger.log_metrics(metrics, step, prefix="train")     # one dict, the trainer's own step axis
        # or, with a wandb run: log_to(wandb_run, record)
