"""In-process TensorRT-LLM engines: :func:`instrument` records an ``LLM``'s (or ``AsyncLLM``'s)
statistics with TensorRT-LLM's own ``MetricsCollector``, as ``trtllm-serve`` does, and serves
them with :func:`vllmstat.expose`.

``trtllm-serve`` creates the collector and feeds it (``tensorrt_llm/serve/openai_server.py``,
``OpenAIServer``): each finished request's per-request metrics go to
``log_request_metrics_dict``, and each finish wakes a drain of the engine's queued iteration
statistics into ``log_iteration_stats``. An engine run in-process (NeMo-RL's TensorRT-LLM
workers) has no server, so nothing records either. This module does what the server does, in
the engine's process, so that the page vllmstat scrapes has the families, labels and moments of
``trtllm-serve``'s. Importing it takes only the standard library; ``tensorrt_llm`` and
``prometheus_client`` are imported by :func:`instrument`."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import warnings
from typing import Any, Callable, List, Optional

from .exposition import expose

__all__ = ["instrument"]

# How long one drain waits for another iteration's statistics before it ends: the server's
# get_stats_async(timeout=0.5).
_DRAIN_TIMEOUT = 0.5
# The pause after a failed drain, as the server's loop makes, so that a persistent error does
# not spin.
_ERROR_PAUSE = 0.1

_lock = threading.Lock()
_state = None  # the process's _Instrumented, once instrument() has made the collector


def instrument(llm: Any, vllmstat: Optional[str] = None, port: int = 0, host: Optional[str] = None,
               token: Optional[str] = None, model_name: Optional[str] = None) -> str:
    """Records a TensorRT-LLM engine's statistics as ``trtllm-serve`` does and serves them.

    Call it once in the process that owns the engine (the Ray actor holding the ``LLM`` or
    ``AsyncLLM``), after creating it and before generating. It creates TensorRT-LLM's
    ``MetricsCollector`` (``tensorrt_llm.metrics``) in this process's default
    ``prometheus_client`` registry, with the labels ``model_name`` and ``engine_type`` (the
    LLM's ``backend``) as the server gives them; wraps ``llm.generate_async`` so that each
    request's result, once finished, gives its per-request metrics to the collector
    (``log_request_metrics_dict``, once per candidate); and, unless the LLM's arguments have
    ``enable_iter_perf_stats`` false, drains the engine's iteration statistics in a thread of
    its own after each finish (``llm.get_stats``, until none came for 0.5 s) into
    ``log_iteration_stats``. Then it calls :func:`vllmstat.expose` with ``vllmstat``, ``port``,
    ``host`` and ``token`` and returns what that returns: the page's URL.

    The engine computes the per-request metrics only with ``return_perf_metrics=True`` in its
    arguments, and the iteration statistics of the PyTorch and AutoDeploy backends only with
    ``enable_iter_perf_stats=True``; without the first, instrument() warns, and the page has no
    tokens or latencies.

    Args:
        llm: the ``tensorrt_llm.LLM`` or ``AsyncLLM``.
        model_name: the ``model_name`` label; by default the LLM's model as ``trtllm-serve``
            names it (a local directory's base name, else the model as given).

    Raises ``ImportError`` when ``tensorrt_llm.metrics`` (or ``prometheus_client``) is missing,
    ``TypeError`` when ``llm`` lacks ``generate_async`` or ``get_stats``, and ``ValueError``
    when another engine of this process was instrumented with other labels (the collector's
    families exist once per registry). Calling it again for the same engine only exposes again.
    """
    global _state
    with _lock:
        if _state is None or _state.llm is not llm:
            gen = getattr(llm, "generate_async", None)
            if not callable(gen):
                raise TypeError("vllmstat.trtllm.instrument: %s has no generate_async method; "
                                "give it the tensorrt_llm LLM or AsyncLLM" % type(llm).__name__)
            args = getattr(llm, "args", None)
            drain = bool(getattr(args, "enable_iter_perf_stats", True))
            if drain and not callable(getattr(llm, "get_stats", None)):
                raise TypeError("vllmstat.trtllm.instrument: %s has no get_stats method, which "
                                "drains its iteration statistics (enable_iter_perf_stats)" % type(llm).__name__)
            if args is not None and not getattr(args, "return_perf_metrics", False):
                warnings.warn("vllmstat.trtllm.instrument: the LLM's arguments do not have "
                              "return_perf_metrics=True, so its requests carry no metrics: the "
                              "page will have no tokens or latencies", RuntimeWarning, stacklevel=2)
            labels = {"model_name": model_name if model_name is not None else _served_name(args),
                      "engine_type": str(getattr(args, "backend", None) or "unknown")}
            if _state is None:
                _state = _Instrumented(_collector(labels), labels)
            elif _state.labels != labels:
                raise ValueError("vllmstat.trtllm.instrument: this process already records an engine "
                                 "with labels %r; another with %r cannot have a collector of its own "
                                 "in the same registry" % (_state.labels, labels))
            _state.attach(llm, gen, drain)
    return expose(vllmstat, port=port, host=host, token=token)


def _collector(labels):
    try:
        from tensorrt_llm.metrics import MetricsCollector  # type: ignore
    except ImportError as e:
        raise ImportError("vllmstat.trtllm.instrument needs TensorRT-LLM's MetricsCollector "
                          "(tensorrt_llm.metrics) in this Python: %s" % (e,)) from None
    return MetricsCollector(labels)


def _served_name(args):
    """The model's name as trtllm-serve gives it: a directory's base name, else the model."""
    model = getattr(args, "model", None)
    if model is None:
        return "unknown"
    model = str(model)
    if os.path.isdir(model):
        return os.path.basename(os.path.normpath(model))
    return model


class _Instrumented:
    """The process's collector, the engine that feeds it and the thread draining its statistics."""

    def __init__(self, collector, labels):
        self.collector = collector
        self.labels = labels
        self.llm = None
        self.wake = threading.Event()
        self._warned = set()

    def attach(self, llm, generate_async, drain):
        self.llm = llm

        @functools.wraps(generate_async)
        def wrapped(*args, **kwargs):
            result = generate_async(*args, **kwargs)
            self.watch(result)
            return result

        llm.generate_async = wrapped
        if drain:
            # The server wakes its collector once at start, for the statistics the executor
            # emits as it starts, and then at each finish.
            self.wake.set()
            threading.Thread(target=self._drain_loop, args=(llm,), name="vllmstat-trtllm-stats",
                             daemon=True).start()

    def watch(self, result):
        """Logs result's metrics once it has finished.

        A result learns its finish when one of its readers (await, aresult, result, async or
        plain iteration) handles the engine's last response: every one of them goes through the
        result's _handle_response, so that is where the finish is seen, whichever reader the
        caller uses, on that reader's thread, right after the result has recorded its metrics.
        """
        found = getattr(result, "_handle_response", None)
        if not callable(found):
            self._warn("result", "vllmstat.trtllm: %s has no _handle_response; its requests' metrics "
                       "are not recorded" % type(result).__name__)
            return
        handle: Callable[..., Any] = found
        done: List[bool] = []  # whether the finish was logged: once, whatever reads the result after

        @functools.wraps(handle)
        def handle_response(*args, **kwargs):
            out = handle(*args, **kwargs)
            if not done and getattr(result, "finished", False):
                done.append(True)
                self.finished(result)
            return out

        result._handle_response = handle_response

    def finished(self, result):
        """As OpenAIServer._extract_metrics: each candidate's metrics, else the result's."""
        try:
            candidates = getattr(result, "candidate_metrics", None)
            if candidates:
                for m in candidates:
                    self.collector.log_request_metrics_dict(m)
            else:
                m = getattr(result, "metrics_dict", None)
                if m:
                    self.collector.log_request_metrics_dict(m)
        except Exception as e:  # a metrics helper must never fail a request
            self._warn("request", "vllmstat.trtllm: cannot record a finished request's metrics: %s" % (e,))
        self.wake.set()

    def _drain_loop(self, llm):
        while True:
            self.wake.wait()
            self.wake.clear()
            try:
                for stats in llm.get_stats(timeout=_DRAIN_TIMEOUT):
                    if isinstance(stats, (str, bytes)):  # older releases give JSON text
                        stats = json.loads(stats)
                    self.collector.log_iteration_stats(stats)
            except Exception as e:
                self._warn("stats", "vllmstat.trtllm: cannot drain the engine's iteration statistics: %s" % (e,))
                time.sleep(_ERROR_PAUSE)

    def _warn(self, kind, msg):
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
