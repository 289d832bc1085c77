"""vllmstat with engines that run inside the trainer's Ray actors (no vLLM HTTP server).

NeMo-RL's generation workers hold vLLM's AsyncLLM (or LLM) inside a Ray actor. vLLM records its
metrics in that actor process's default prometheus_client registry, which nothing serves. Two
lines in the worker's __init__, after the engine exists, serve that registry on a free port and
register it with vllmstat; vllmstat then scrapes it like any vLLM server, one target per actor.

On the trainer's host, start vllmstat with no targets:

    VLLMSTAT_API_TOKEN=$(openssl rand -hex 16) vllmstat run --listen 0.0.0.0:9400 --step-every 0 &

(a non-loopback --listen needs the token; the actors need the same VLLMSTAT_API_TOKEN in their
environment, e.g. through Ray's runtime_env={"env_vars": {...}}). The training loop ends steps
as in examples/nemo_rl_grpo.py: record = Client("http://127.0.0.1:9400").end_step(step).

This file is a sketch of the hook, not runnable NeMo-RL code: the marked lines are what changes.

veRL (vLLMRollout / AsyncvLLMServer) and OpenRLHF (its LLMRayActor) build the engine the same way,
inside a Ray actor: put the same two lines in that actor's __init__ right after the engine is
created. With several engines per node, each actor serves its own page on its own port.
"""

import os


class VllmAsyncGenerationWorker:  # stands in for NeMo-RL's Ray actor of the same role
    def __init__(self, config, *args, **kwargs):
        self.cfg = config
        self.llm = self._create_engine(config)  # AsyncLLM.from_engine_args(...), as before

        # -- vllmstat: serve this process's vLLM metrics and register them (never raises) --
        from vllmstat_client import expose  # the vllmstat package installed in the actors' environment

        self.metrics_url = expose(os.environ.get("VLLMSTAT_URL", "http://TRAINER_HOST:9400"))
        # -- end of the vllmstat lines --

    def _create_engine(self, config):
        raise NotImplementedError("the framework's own engine construction goes here")


# Notes:
# - Keep stats on: vLLM records nothing when the engine was built with disable_log_stats=True
#   (the offline LLM's default); NeMo-RL's async worker already passes its Prometheus logger.
# - The URL is this actor's address on the interface that routes to TRAINER_HOST (loopback when
#   vllmstat is local); pass host="..." to expose() to choose it yourself.
# - If vllmstat is not up yet, expose() returns the URL at once and registers it in the
#   background when vllmstat comes up. When the actor exits normally, its page is scraped once
#   more and removed from vllmstat's targets; what it counted stays in the open step.
# - An actor killed outright (ray.kill, SIGKILL) cannot deregister: vllmstat counts failed
#   scrapes of its URL until Client(...).remove_targets([url]) removes it.
