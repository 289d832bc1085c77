"""vllmstat: exact per-training-step metrics from a fleet of vLLM engines.

The package bundles the ``vllmstat`` binary (run it as ``vllmstat`` or ``python -m vllmstat``)
and its Python client, :mod:`vllmstat.client` (also importable as ``vllmstat_client``)::

    import vllmstat

    with vllmstat.start(targets=["10.0.0.1:8000"], step_every=0, listen="127.0.0.1:0") as vs:
        for step in range(num_steps):
            ...                                   # generate and train
            record = vs.end_step(step)            # the step's record: {"metrics": {...}, ...}
            logger.log(vllmstat.scalars(record), step)
"""

from .client import (
    Client,
    Sidecar,
    VllmstatError,
    __version__,
    binary_path,
    expose,
    log_to,
    ray_targets,
    scalars,
    start,
)

__all__ = [
    "Client",
    "Sidecar",
    "VllmstatError",
    "__version__",
    "binary_path",
    "expose",
    "log_to",
    "ray_targets",
    "scalars",
    "start",
]
