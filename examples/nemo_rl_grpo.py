"""The lines to add to a NeMo-RL-style GRPO loop to log per-step vLLM metrics with vllmstat.

NeMo-RL already has the keys (policy.generation.vllm_cfg):

    enable_vllm_metrics_logger: true
    vllm_metrics_logger_interval: 0.5
    vllm_metrics_log_scalars: true
    vllm_metrics_log_timeline_plots: false

Add a `vllmstat:` section with the engines' /metrics URLs (or set them at run time, see below)
and `step_every: 0`, and start the sidecar with the same config file:

    vllmstat run --config grpo.yaml &

The phase calls mark windows inside a step: "rollout" around generation, "eval" around
validation. The record then holds each phase's figures next to the whole step's
(`vllm/rollout/prefix_cache_hit_rate`, ...), so that validation rollouts do not blur the training
ones. Each phase edge takes a boundary scrape of every engine, like a step end (up to a second
or two).

This file is a sketch of the loop, not runnable NeMo-RL code: the marked lines are what changes.
"""

from vllmstat_client import Client, log_to, scalars  # noqa: F401  (log_to: see the last line)

vs = Client()  # 1. once, before the loop


def grpo_train(policy, policy_generation, dataloader, val_dataloader, validate, logger, master_config):
    val_period = master_config["grpo"]["val_period"]
    # 2. optional: engines are created at run time; tell vllmstat where they are
    #    (each vLLM API server's /metrics, e.g. from the Ray actors' IPs and ports)
    # vs.add_targets(["http://%s:%d/metrics" % (ip, port) for ip, port in engine_addresses])
    #    Engines inside the Ray actors, with no HTTP server, register themselves instead:
    #    see nemo_rl_inprocess_worker.py (expose() in the worker's __init__).
    for step, batch in enumerate(dataloader):
        with vs.phase("rollout"):                             # 3. around generation
            rollouts = policy_generation.generate(batch)      # vLLM does its work here
        train_metrics = policy.train(rollouts)                # the engines sleep: in no phase
        if val_period > 0 and (step + 1) % val_period == 0:
            with vs.phase("eval"):                            # 4. around validation
                val_metrics = validate(policy_generation, val_dataloader)
            logger.log_metrics(val_metrics, step, prefix="validation")
        record = vs.end_step(step)                            # 5. at the end of the step
        metrics = dict(train_metrics)
        metrics.update(scalars(record))  # "vllm/prefix_cache_hit_rate", "vllm/rollout/...", "vllm/eval/..."
        logger.log_metrics(metrics, step, prefix="train")     # one dict, the trainer's own step axis
        # or, with a wandb run: log_to(wandb_run, record)
