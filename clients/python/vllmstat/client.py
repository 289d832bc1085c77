"""Client for vllmstat's HTTP API, for training loops, and a metrics page for in-process engines.

This module is ``vllmstat.client`` in the ``vllmstat`` package (``pip install
./clients/python``), which bundles the vllmstat binary; ``import vllmstat_client`` is the same
module. The package's Python part (Python 3.9+) also works without installing it: copy the
``vllmstat`` directory, and ``vllmstat_client.py`` for that name, next to your trainer. The client
needs only the standard library; :func:`expose` also uses ``prometheus_client``, which vLLM
itself depends on.

This module is the client's public face: every public name is importable from here. It holds
the record helpers (:func:`scalars`, :func:`log_to`) and takes the rest from the modules below
it, which never import it: the HTTP client (:class:`Client`) from ``vllmstat._api``, the sidecar
(:func:`start`, :class:`Sidecar`, :func:`binary_path`) from :mod:`vllmstat.sidecar` and the
in-process engines' page (:func:`expose`, :func:`ray_targets`) from :mod:`vllmstat.exposition`.

vllmstat runs beside the trainer as a sidecar (``vllmstat run --step-every 0``), started by
hand or by :func:`start`, which runs the binary as a child process and stops it at exit. At the
end of each training step the trainer calls :meth:`Client.end_step`; vllmstat scrapes every vLLM
engine once more, closes the step and returns its record, whose ``"metrics"`` are a flat dict of
numbers (``"vllm/prefix_cache_hit_rate"``, ``"vllm/num_preemptions"``, ...) ready to log on the
trainer's own step axis.

Phases are named windows inside a step (``with vs.phase("rollout"):`` around generation,
``with vs.phase("eval"):`` around validation): the record's ``"phases"`` hold the same keys
computed over each phase alone, and :func:`scalars` flattens them as ``"vllm/rollout/..."``.

A metrics sidecar must never crash a training run: by default a connection failure, an error
answer or an argument the client refuses makes a call return an empty result and warn, with the
reason: at most once a minute for each kind of failure, the next warning counting the calls not
warned about. ``strict=True`` raises :class:`VllmstatError` (``ValueError`` for a bad argument)
instead. A vllmstat that takes
connections and never answers (stopped, or hung) costs one call ``hang_timeout`` (15 s) at
most; later calls fail at once until it answers ``/healthz`` again, asked every 5 s at most.

Example::

    from vllmstat_client import Client, log_to, scalars

    vs = Client()                       # $VLLMSTAT_URL or http://127.0.0.1:9400, VLLMSTAT_API_TOKEN if set
    for step in range(num_steps):
        with vs.phase("rollout"):       # the engines' work in this phase is counted apart
            batch = generate_rollouts(...)
        train(batch)
        vs.set_policy_version(step)     # the new weights, before the engines load them
        sync_weights_to_engines()
        record = vs.end_step(step)      # {} if vllmstat is unreachable
        metrics.update(scalars(record)) # "vllm/...", and "vllm/rollout/..." for the phase
        logger.log(metrics, step)       # or, with a wandb run: log_to(wandb_run, record)

The same loop with the sidecar started from Python (no second terminal)::

    import vllmstat_client

    with vllmstat_client.start(targets=["10.0.0.1:8000", "10.0.0.2:8000"], step_every=0,
                               out_dir="runs/grpo/vllmstat", listen="127.0.0.1:0") as vs:
        for step in range(num_steps):
            ...
            record = vs.end_step(step)

Engines that run inside the trainer's processes (vLLM's ``LLM``/``AsyncLLM`` in a Ray actor, as
in NeMo-RL, veRL and OpenRLHF) have no ``/metrics`` server; in the process that owns the engine::

    from vllmstat_client import expose
    expose("http://TRAINER_HOST:9400")  # serves this process's metrics, registers them with vllmstat
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Dict, Mapping, Optional

from . import _api, exposition as _exposition, page as _page, sidecar as _sidecar
from ._api import Client, Number  # noqa: F401
from ._common import DEFAULT_URL, Record, VllmstatError, __version__  # noqa: F401
from .exposition import expose, ray_targets  # noqa: F401
from .sidecar import Sidecar, binary_path, start  # noqa: F401

__all__ = ["Client", "Sidecar", "VllmstatError", "binary_path", "expose", "log_to", "ray_targets", "scalars",
           "start"]


def scalars(record: Optional[Mapping[str, Any]], prefix: str = "") -> Dict[str, Any]:
    """Returns a step record's numbers as one flat dict, to merge into a trainer's own log.

    Holds the record's ``"metrics"`` and every phase's, with the phase's name after the key's
    first segment (the run's metric prefix): ``"vllm/prefix_cache_hit_rate"`` of phase
    ``rollout`` is ``"vllm/rollout/prefix_cache_hit_rate"``, as vllmstat's own trackers log it.
    ``prefix`` goes before every key. ``{}`` for an empty record (a failed :meth:`Client.end_step`).
    """
    out = {prefix + k: v for k, v in (record or {}).get("metrics", {}).items()}
    phases = (record or {}).get("phases") or {}
    for name in sorted(phases):
        for k, v in (phases[name].get("metrics") or {}).items():
            head, sep, rest = k.partition("/")
            out[prefix + (head + "/" + name + "/" + rest if sep else name + "/" + k)] = v
    return out


def log_to(run: Any, record: Optional[Mapping[str, Any]], images: bool = False, out_dir: Optional[str] = None,
           prefix: str = "") -> None:
    """Logs a step record's metrics to ``run`` at ``step=record["step"]``.

    What is logged is :func:`scalars` of the record: the step's keys and each phase's.

    ``run`` is anything with a W&B-style ``log(dict, step=...)`` method; no tracker is imported
    here. Does nothing for an empty record (a failed :meth:`Client.end_step`).

    With ``images=True`` and a record that lists timeline plots (``"plots"``, paths relative to
    vllmstat's ``out_dir``, which ``out_dir`` gives), each plot is logged too, as
    ``run.Image(path)`` when the run's module offers one (wandb), else as the path.

    Examples::

        # Weights & Biases
        import wandb
        run = wandb.init(project="grpo")
        log_to(run, client.end_step(step))

        # TensorBoard
        from torch.utils.tensorboard import SummaryWriter
        class TB:
            def __init__(self, w): self.w = w
            def log(self, d, step): [self.w.add_scalar(k, v, step) for k, v in d.items()]
        log_to(TB(SummaryWriter("runs/grpo")), client.end_step(step))

        # MLflow (metric names may not contain some characters; "/" is fine)
        import mlflow
        class MLflow:
            def log(self, d, step): mlflow.log_metrics(d, step=step)
        log_to(MLflow(), client.end_step(step))
    """
    if not record or "step" not in record:
        return
    metrics = scalars(record, prefix)
    if images:
        image = _image_factory(run)
        for rel in record.get("plots", []) or []:
            path = os.path.join(out_dir, rel) if out_dir else rel
            key = prefix + "plots/" + os.path.splitext(os.path.basename(rel))[0]
            metrics[key] = image(path) if image else path
    run.log(metrics, step=record["step"])


def _image_factory(run):
    """Returns the Image class of the tracker module that made run, if it has one."""
    module = type(run).__module__.split(".")[0]
    try:
        mod = __import__(module)
    except ImportError:
        return None
    return getattr(mod, "Image", None)


# The other modules' names, which this module has offered since it held them all (the HTTP
# client's among them), are read, and set, through it in the module that owns them, where that
# module's functions see them: vllmstat_client._exposure = None forgets expose()'s page.
_OWNERS = (_api, _sidecar, _exposition, _page)


def __getattr__(name: str) -> Any:
    for mod in _OWNERS:
        if name in vars(mod):
            return vars(mod)[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


class _Module(types.ModuleType):
    """This module's type: setting a name that another module owns sets it there."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in vars(self):
            for mod in _OWNERS:
                if name in vars(mod):
                    setattr(mod, name, value)
                    return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Module
