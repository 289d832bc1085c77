"""Client for vllmstat's HTTP API, for training loops, and a metrics page for in-process engines.

This module is ``vllmstat.client`` in the ``vllmstat`` package (``pip install
./clients/python``), which bundles the vllmstat binary; ``import vllmstat_client`` is the same
module. It is also one file (Python 3.9+) that works on its own: copy it next to your trainer as
``vllmstat_client.py``. The client needs only the standard library; :func:`expose` also uses
``prometheus_client``, which vLLM itself depends on.

vllmstat runs beside the trainer as a sidecar (``vllmstat run --step-every 0``), started by
hand or by :func:`start`, which runs the binary as a child process and stops it at exit. At the
end of each training step the trainer calls :meth:`Client.end_step`; vllmstat scrapes every vLLM
engine once more, closes the step and returns its record, whose ``"metrics"`` are a flat dict of
numbers (``"vllm/prefix_cache_hit_rate"``, ``"vllm/num_preemptions"``, ...) ready to log on the
trainer's own step axis.

Phases are named windows inside a step (``with vs.phase("rollout"):`` around generation,
``with vs.phase("eval"):`` around validation): the record's ``"phases"`` hold the same keys
computed over each phase alone, and :func:`scalars` flattens them as ``"vllm/rollout/..."``.

A metrics sidecar must never crash a training run: by default a connection failure or an error
answer makes a call return an empty result and warn once, with the reason, until vllmstat
answers again. ``strict=True`` raises :class:`VllmstatError` instead. A vllmstat that takes
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

import atexit
import contextlib
import http.client
import ipaddress
import itertools
import json
import operator
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections import deque
from typing import IO, Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

__all__ = ["Client", "Sidecar", "VllmstatError", "binary_path", "expose", "log_to", "ray_targets", "scalars",
           "start"]

#: A step record as vllmstat returns it: ``{"step": 3, "metrics": {...}, "phases": {...}, ...}``.
Record = Dict[str, Any]

# The API's address when neither the caller nor VLLMSTAT_URL names one (vllmstat's default listen).
DEFAULT_URL = "http://127.0.0.1:9400"

_HERE = os.path.dirname(os.path.abspath(__file__))


def _read_version() -> str:
    """The release number from the VERSION file beside this module (the Go binary embeds the
    same file); "unknown" for a copy of this file on its own."""
    try:
        with open(os.path.join(_HERE, "VERSION"), encoding="utf-8") as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "unknown"


#: This client's release number; ``vllmstat --version`` of the bundled binary says the same.
__version__ = _read_version()


def _base_url(url: Optional[str]) -> str:
    """The API's base URL: ``url``, else ``VLLMSTAT_URL``, else the default; ``host:port`` gets http://."""
    url = url or os.environ.get("VLLMSTAT_URL") or DEFAULT_URL
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


# What vllmstat accepts as a phase name (it also refuses the names of its step keys).
_PHASE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


class VllmstatError(Exception):
    """A call to vllmstat failed: no connection, or an error answer.

    ``status`` is the HTTP status code (``None`` when there was no answer).
    """

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


class _NoAnswer(VllmstatError):
    """vllmstat took the request and did not answer in time."""


class Client:
    """Talks to one vllmstat sidecar.

    Args:
        url: base URL of the API (``listen`` in vllmstat's config; ``host:port`` is read as
            ``http://host:port``). Defaults to the ``VLLMSTAT_URL`` environment variable, else
            ``http://127.0.0.1:9400``, vllmstat's default.
        token: bearer token (``api_token``); defaults to the ``VLLMSTAT_API_TOKEN`` environment
            variable.
        timeout: seconds to wait for an answer. Ending a step (or a phase) waits for one scrape
            of every engine, at most twice vllmstat's scrape timeout (which is 10 s at most
            unless set); vllmstat itself gives up on an answer after that plus 30 s.
        strict: raise :class:`VllmstatError` on failure instead of warning and returning empty.
        hang_timeout: seconds after which a call without an answer gives up when vllmstat does
            not answer ``/healthz`` either (asked then, with ``probe_timeout``): it takes
            connections but does nothing, as when stopped (SIGSTOP). While ``/healthz``
            answers, vllmstat is busy (a boundary scrape of a slow engine) and the call waits
            on, up to ``timeout``, asking again every ``hang_timeout - probe_timeout``. A
            ``timeout`` no longer than ``hang_timeout`` is the call's bound by itself.
        probe_timeout: seconds to wait for ``/healthz`` when asking whether vllmstat answers.
        probe_every: after a call that got no answer in time, vllmstat counts as not answering:
            calls fail at once, without a request, until ``/healthz`` answers again; it is asked
            at most once every ``probe_every`` seconds, by the call that comes then.
        clock: the monotonic clock in seconds that ``probe_every`` is read on.

    After its first answered call the client asks ``/healthz`` for vllmstat's version, once,
    and warns (once per process and vllmstat) when it is not this client's ``__version__``.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, timeout: float = 60.0,
                 strict: bool = False, hang_timeout: float = 15.0, probe_timeout: float = 1.0,
                 probe_every: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < probe_timeout < hang_timeout:
            raise ValueError("probe_timeout must be > 0 and less than hang_timeout, got %r and %r"
                             % (probe_timeout, hang_timeout))
        self.url = _base_url(url)
        self.token = token if token is not None else os.environ.get("VLLMSTAT_API_TOKEN") or None
        self.timeout = timeout
        self.strict = strict
        self.hang_timeout = hang_timeout
        self.probe_timeout = probe_timeout
        self.probe_every = probe_every
        self.clock = clock
        # Why vllmstat counts as not answering (None while it answers), and when to ask again.
        self._silent: Optional[str] = None
        self._next_probe = 0.0
        self._failing = False
        self._warned: set = set()  # kinds of phase-call failures warned about already
        self._version_checked = False

    # -- calls ------------------------------------------------------------------------------

    def end_step(self, step: int) -> Record:
        """Ends training step ``step`` and returns its record (``{}`` on failure).

        Step numbers must increase; they may skip (log every 5th step, say).
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError("step must be an int >= 0, got %r" % (step,))
        return self._call("POST", "/v1/steps/end", {"step": step}, empty={})

    def start_phase(self, name: str) -> Optional[Dict[str, Any]]:
        """Starts phase ``name`` in the open step; returns the edge (``None`` on failure).

        The edge, ``{"phase", "edge": "start", "ts", "ended"}``, takes effect after a boundary
        scrape of every engine, so the call takes about as long as :meth:`end_step`. Starting a
        phase ends the open one (named by ``"ended"``); a phase open at a step end goes on in
        the next step. Names are a lower-case letter, then up to 31 lower-case letters, digits
        or underscores, and not the name of a step key (vllmstat answers 400).
        """
        return self._phase_edge("start", name, depth=2)

    def end_phase(self, name: str) -> Optional[Dict[str, Any]]:
        """Ends phase ``name``; returns the edge (``None`` on failure, e.g. when it is not open)."""
        return self._phase_edge("end", name, depth=2)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[Optional[Dict[str, Any]]]:
        """Runs the ``with`` body as phase ``name``: starts it on entry and ends it on exit.

        The phase ends also when the body raises, and the body's exception propagates as it
        was (a failure to end the phase then is only warned about, even when strict). Yields
        the start edge, or ``None`` when the start failed; the body runs either way, unless
        the client is strict.
        """
        # depth 3: this generator and contextlib's __enter__ or __exit__ lie above the calls
        if not self._valid_phase(name, depth=3):
            yield None
            return
        edge = self._phase_edge("start", name, depth=3)
        try:
            yield edge
        except BaseException:
            try:
                self._phase_edge("end", name, depth=3)
            except VllmstatError as e:  # strict: the body's exception is the one to see
                warnings.warn("vllmstat: %s" % e, RuntimeWarning, stacklevel=3)
            raise
        self._phase_edge("end", name, depth=3)

    def set_policy_version(self, version: int) -> Optional[Dict[str, Any]]:
        """Says that the trainer published version ``version`` of its weights now; returns
        ``{"version", "ts"}`` once it took effect (``None`` on failure).

        Versions are whole numbers from 0 to 2**53 that only grow, such as the step whose
        update made the weights: a version not greater than the last one is refused (409). Call
        it as soon as the trainer has the new weights, before the engines load them: an engine
        that reports no version of its own is taken to hold it from the end of its first pause,
        sleep, waking or weight load that starts after the call. Like a phase edge, the publish
        takes effect after a boundary scrape of every engine, so the call takes about as long
        as :meth:`end_step`. The step records then say which engines are behind and how many
        tokens they generated on older weights. Never raises unless the client is strict; a
        refusal is warned about once.
        """
        if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 2 ** 53:
            msg = "vllmstat: policy version must be an int from 0 to 2**53, got %r" % (version,)
            if self.strict:
                raise ValueError(msg)
            self._warn_once(("policy", type(version).__name__, repr(version)), msg + "; skipping the call", stacklevel=3)
            return None
        try:
            out = self._request("POST", "/v1/policy", {"version": version})
        except VllmstatError as e:
            if self.strict:
                raise
            if e.status is None or e.status >= 500:
                return self._failed(e, stacklevel=3)
            # vllmstat answers, and refuses the version: a mistake in the trainer's calls that
            # would repeat every step, so it is told once (per status)
            self._warn_once(("policy", e.status), "vllmstat: %s" % e, stacklevel=3)
            return None
        self._failing = False
        return out

    def live(self) -> Dict[str, Any]:
        """Returns the open step so far and every target's state: ``{"step": ..., "targets": [...]}``."""
        return self._call("GET", "/v1/live", empty={})

    def steps(self, since: int = 0) -> List[Record]:
        """Returns the closed steps numbered ``since`` or later that vllmstat keeps in memory."""
        out = self._call("GET", "/v1/steps?" + urllib.parse.urlencode({"since": int(since)}), empty={})
        return out.get("steps", []) if out else []

    def step(self, number: int) -> Record:
        """Returns one closed step's record (``{}`` if unknown or on failure)."""
        return self._call("GET", "/v1/steps/%d" % int(number), empty={})

    def set_targets(self, urls: Iterable[str]) -> List[str]:
        """Replaces the scraped targets (http/https ``/metrics`` URLs); returns them as vllmstat keeps them."""
        out = self._call("PUT", "/v1/targets", {"targets": list(urls)}, empty={})
        return out.get("targets", []) if out else []

    def add_targets(self, urls: Iterable[str]) -> List[str]:
        """Adds targets, leaving the others alone (idempotent); returns every target now scraped.

        Many workers may each add their own URL at the same time.
        """
        out = self._call("POST", "/v1/targets", {"targets": list(urls)}, empty={})
        return out.get("targets", []) if out else []

    def remove_targets(self, urls: Iterable[str]) -> List[str]:
        """Removes these targets (idempotent: unknown URLs are ignored); returns every target now scraped.

        What a removed target counted stays in the open step.
        """
        out = self._call("DELETE", "/v1/targets", {"targets": list(urls)}, empty={})
        return out.get("targets", []) if out else []

    def targets(self) -> List[str]:
        """Returns the current targets."""
        out = self._call("GET", "/v1/targets", empty={})
        return out.get("targets", []) if out else []

    def health(self) -> bool:
        """Returns True when vllmstat answers its health check (and compares its version).

        False at once while vllmstat counts as not answering (see ``probe_every``).
        """
        out = self._call("GET", "/healthz", empty={})
        if out:
            self._version_checked = True
            _compare_version(self.url, out, stacklevel=3)
        return bool(out) and out.get("status") == "ok"

    def version(self) -> Optional[str]:
        """Returns the version vllmstat reports on ``/healthz`` (``None`` on failure or when it reports none)."""
        out = self._call("GET", "/healthz", empty={})
        return out.get("version") if out else None

    # -- plumbing ---------------------------------------------------------------------------

    # The phase helpers' warnings point at the trainer's line: depth counts the frames above the
    # helper up to the trainer's own (2 below start_phase: start_phase and the trainer's).

    def _phase_edge(self, edge, name, depth):
        if not self._valid_phase(name, depth + 1):
            return None
        try:
            out = self._request("POST", "/v1/phases/" + edge, {"phase": name})
        except VllmstatError as e:
            if self.strict:
                raise
            if e.status is None or e.status >= 500:
                return self._failed(e, stacklevel=depth + 2)
            # vllmstat answers, and refuses this call: a mistake in the trainer's phase calls
            # that would repeat every step, so it is told once (per status and phase)
            self._warn_once((e.status, name), "vllmstat: %s" % e, stacklevel=depth + 2)
            return None
        self._failing = False
        return out

    def _valid_phase(self, name, depth):
        """Checks a phase name before any request: raises when strict, else warns once per name."""
        if isinstance(name, str) and _PHASE_NAME.fullmatch(name):
            return True
        msg = ("vllmstat: phase name %r: want a lower-case letter, then up to 31 lower-case letters, "
               "digits or underscores" % (name,))
        if self.strict:
            raise ValueError(msg)
        self._warn_once(("name", type(name).__name__, repr(name)), msg + "; skipping the call",
                        stacklevel=depth + 2)
        return False

    def _warn_once(self, kind, msg, stacklevel):
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel)

    def _call(self, method, path, body=None, empty=None):
        try:
            out = self._request(method, path, body)
        except VllmstatError as e:
            if self.strict:
                raise
            return self._failed(e, empty)
        self._failing = False
        if not self._version_checked and path != "/healthz":
            self._version_checked = True
            self._check_version()
        return out

    def _check_version(self):
        """Asks vllmstat for its version once; a failure here is not the call's and stays silent."""
        try:
            out = self._request("GET", "/healthz", None)
        except VllmstatError:
            return
        if isinstance(out, dict):
            _compare_version(self.url, out, stacklevel=5)

    def _failed(self, e, empty=None, stacklevel=4):
        """Warns about a failed call unless the previous one failed too; returns empty."""
        if not self._failing:
            self._failing = True
            warnings.warn("vllmstat: %s (further failures are silent until it answers again)" % e,
                          RuntimeWarning, stacklevel=stacklevel)
        return empty

    def _request(self, method, path, body):
        """Sends one call, or fails it at once while vllmstat counts as not answering."""
        self._skip_if_silent(method, path)
        try:
            out = self._bounded(method, path, body)
        except _NoAnswer as e:
            self._silent = str(e)
            self._next_probe = self.clock() + self.probe_every
            raise
        except VllmstatError as e:
            if e.status is not None:
                self._silent = None  # an error answer is an answer
            raise
        self._silent = None
        return out

    def _skip_if_silent(self, method, path):
        """Raises while vllmstat counts as not answering, unless /healthz is due and answers."""
        why = self._silent
        if why is None:
            return
        now = self.clock()
        if now >= self._next_probe:
            self._next_probe = now + self.probe_every
            why = self._probe()
            if why is None:
                self._silent = None
                return
            self._silent = why
        raise VllmstatError("%s %s: not sent: vllmstat does not answer (%s); calls fail at once until it "
                            "answers /healthz again, asked every %gs at most" % (method, path, why, self.probe_every))

    def _probe(self):
        """Asks /healthz with the short timeout; returns None when vllmstat answers, else why not."""
        try:
            self._http("GET", "/healthz", None, min(self.probe_timeout, self.timeout))
        except VllmstatError as e:
            return None if e.status is not None else str(e)
        return None

    def _bounded(self, method, path, body):
        """The request, given up after hang_timeout when vllmstat does not answer /healthz either.

        A step end or phase edge may take longer than hang_timeout (a boundary scrape of an
        engine slower than that), which is why a silent call asks /healthz, on a connection of
        its own, rather than giving up: vllmstat answers it at once unless it is stopped. The
        request runs on a thread of its own, which ends within timeout; a late answer is dropped.
        """
        if self.timeout <= self.hang_timeout:
            return self._http(method, path, body, self.timeout)
        result: List[Any] = []
        done = threading.Event()

        def run():
            try:
                result.append((None, self._http(method, path, body, self.timeout)))
            except BaseException as e:  # handed to the caller
                result.append((e, None))
            finally:
                done.set()

        threading.Thread(target=run, name="vllmstat-call", daemon=True).start()
        while not done.wait(self.hang_timeout - self.probe_timeout):
            why = self._probe()
            if why is not None and not done.is_set():
                raise _NoAnswer("%s %s: no answer from %s within %gs, nor to /healthz (%s): it looks stopped "
                                "or hung" % (method, path, self.url, self.hang_timeout - self.probe_timeout, why))
        err, out = result[0]
        if err is not None:
            raise err
        return out

    def _http(self, method, path, body, timeout):
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            try:
                msg = json.loads(raw.decode()).get("error") or raw.decode(errors="replace")
            except (ValueError, AttributeError):
                msg = raw.decode(errors="replace")[:200]
            raise VllmstatError("%s %s: HTTP %d: %s" % (method, path, e.code, msg), e.code) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, socket.timeout):
                raise _NoAnswer("%s %s: no answer from %s: timed out after %gs" % (
                    method, path, self.url, timeout)) from None
            raise VllmstatError("%s %s: cannot reach %s: %s" % (method, path, self.url, reason)) from None
        except http.client.HTTPException as e:  # an answer that is not HTTP, or cut short
            raise VllmstatError("%s %s: bad answer from %s: %s: %s" % (
                method, path, self.url, type(e).__name__, e)) from None
        try:
            return json.loads(raw.decode())
        except ValueError:
            raise VllmstatError("%s %s: answer is not JSON: %r" % (method, path, raw[:200])) from None


_versions_lock = threading.Lock()
_versions_warned: set = set()  # (url, version) pairs warned about in this process


def _compare_version(url: str, health: Mapping[str, Any], stacklevel: int) -> None:
    """Warns, once per process and (url, version), when vllmstat's version is not this client's."""
    theirs = health.get("version")
    if __version__ == "unknown" or theirs == __version__:
        return
    with _versions_lock:
        if (url, theirs) in _versions_warned:
            return
        _versions_warned.add((url, theirs))
    said = "reports no version (it is older than this client)" if theirs is None else "is version %s" % (theirs,)
    warnings.warn("vllmstat: the vllmstat at %s %s, this client is version %s; records and calls may "
                  "differ from what this client documents" % (url, said, __version__),
                  RuntimeWarning, stacklevel=stacklevel + 1)


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


# -- the sidecar ---------------------------------------------------------------------------------
#
# start() runs `vllmstat run` as a child process of the trainer: its settings go into a config
# file of its own (JSON, which vllmstat reads as YAML), or, beside a config file the trainer
# names, into the flags that set them. The API's address, which the trainer may leave to the
# system (port 0), is read from the run's "api listening url=..." line.

# Settings that a flag of `vllmstat run` sets: with a config file, these are all start() can add.
_RUN_FLAGS = {
    "targets": "--target",
    "out_dir": "--out",
    "listen": "--listen",
    "step_every": "--step-every",
    "scrape_timeout": "--scrape-timeout",
    "vllm_metrics_logger_interval": "--interval",
    "metric_prefix": "--metric-prefix",
    "per_worker": "--per-worker",
    "vllm_metrics_log_scalars": "--log-scalars",
    "record": "--record",
    "worker_labels": "--worker-labels",
    "sinks": "--sinks",
}
# Short names start() takes for config keys.
_ALIASES = {"interval": "vllm_metrics_logger_interval"}
# How many of the sidecar's last output lines are kept for error messages.
_TAIL_LINES = 40
_API_LINE = re.compile(r'api listening"? url=(\S+)')

_sidecars_lock = threading.Lock()
_sidecars: set = set()  # sidecars not closed yet: closed at interpreter exit
_sidecars_at_exit = False


def _bundled_binary() -> Optional[str]:
    """The binary that installing the package built into it, if this is an installed package."""
    path = os.path.join(_HERE, "bin", "vllmstat.exe" if os.name == "nt" else "vllmstat")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def binary_path() -> str:
    """Returns the vllmstat binary that :func:`start` runs.

    ``VLLMSTAT_BIN`` when it is set; else the binary bundled in the installed package (``pip
    install ./clients/python`` builds it); else ``vllmstat`` on ``PATH``. Raises
    ``FileNotFoundError`` when there is none.
    """
    for path in (os.environ.get("VLLMSTAT_BIN"), _bundled_binary(), shutil.which("vllmstat")):
        if path:
            return path
    raise FileNotFoundError("no vllmstat binary: VLLMSTAT_BIN is not set, this copy of the client has none "
                            "bundled and there is no vllmstat on PATH (pip install ./clients/python from a "
                            "clone of vllmstat bundles one; or go install ./cmd/vllmstat)")


class Sidecar(Client):
    """A ``vllmstat run`` that :func:`start` runs as a child process, and a :class:`Client` for it.

    Stop it with :meth:`close`, or use it as a context manager; one still running at interpreter
    exit is stopped then. Stopping sends SIGTERM: vllmstat scrapes every engine once more,
    closes (or, with ``step_every=0``, sets apart) the open step, flushes its sinks and exits.

    When the process ends on its own, a warning gives its exit code and last output lines, and
    calls that find it gone fail with them (``strict``: :class:`VllmstatError`).

    Attributes:
        url: the API's base URL, with the port the system chose for ``listen`` port 0.
        process: the ``subprocess.Popen`` of the binary.
        out_dir: the run's output directory when ``start()`` was given it, else ``None``.
    """

    def __init__(self, url: str, process: subprocess.Popen, output: _Output, out_dir: Optional[str] = None,
                 token: Optional[str] = None, timeout: float = 60.0, strict: bool = False,
                 cleanup: Optional[str] = None) -> None:
        super().__init__(url, token=token, timeout=timeout, strict=strict)
        self.process = process
        self.out_dir = out_dir
        self._output = output
        self._cleanup = cleanup  # the directory of the config file start() wrote
        self._state = threading.Lock()
        self._closing = False
        self._exit_warned = False
        output.on_end(self._ended)

    @property
    def pid(self) -> int:
        """The process id of the binary."""
        return self.process.pid

    @property
    def returncode(self) -> Optional[int]:
        """The exit code once the process has ended, else ``None``."""
        return self.process.poll()

    def output(self) -> List[str]:
        """The last lines the process wrote (stdout and stderr, up to 40)."""
        return list(self._output.tail)

    def close(self, timeout: float = 60.0) -> Optional[int]:
        """Stops the process (SIGTERM; SIGKILL after ``timeout`` seconds) and returns its exit code.

        vllmstat exits 0 after a clean stop. Calling it again returns the same code.
        """
        with self._state:
            self._closing = True
        try:
            if self.process.poll() is None:
                try:
                    self.process.send_signal(signal.SIGTERM)
                except OSError:
                    pass
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    warnings.warn("vllmstat: the sidecar (pid %d) did not stop within %gs of SIGTERM; killing it"
                                  % (self.process.pid, timeout), RuntimeWarning, stacklevel=2)
                    self.process.kill()
                    self.process.wait()
            self._output.join(10.0)
        finally:
            if self._cleanup:
                shutil.rmtree(self._cleanup, ignore_errors=True)
                self._cleanup = None
            with _sidecars_lock:
                _sidecars.discard(self)
        return self.process.returncode

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.process.poll() is None else "exited %d" % self.process.returncode
        return "<vllmstat.Sidecar pid=%d url=%s %s>" % (self.process.pid, self.url, state)

    def _request(self, method, path, body):
        try:
            return super()._request(method, path, body)
        except VllmstatError as e:
            if e.status is None and self.process.poll() is not None:
                raise VllmstatError("%s %s: the vllmstat sidecar %s" % (method, path, self._exit_story())) from None
            raise

    def _exit_story(self) -> str:
        return "(pid %d) exited with code %s; its last lines:\n%s" % (
            self.process.pid, self.process.poll(), _indent(self._output.tail))

    def _ended(self) -> None:
        """The process's output ended: unless it is being stopped, says that it died, and how."""
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            return  # closed its output but lives on: the calls will tell
        with self._state:
            if self._closing or self._exit_warned:
                return
            self._exit_warned = True
        warnings.warn("vllmstat: the sidecar " + self._exit_story(), RuntimeWarning, stacklevel=2)


class _Output:
    """Follows a child's log file on a thread: keeps its last lines, finds the API's URL, copies
    the lines on, and tells when the process has ended.

    The child writes to a file, not a pipe: it never waits for this process to read (a trainer
    busy in a long call must not stall the scrapes), and it can still log its shutdown when
    this process is gone (a write to a pipe whose reader died would end it with SIGPIPE).
    """

    _POLL = 0.05  # seconds between looks at the file while it has nothing new

    def __init__(self, path: str, process: subprocess.Popen, echo: Union[bool, IO[str]]) -> None:
        self.tail: Deque[str] = deque(maxlen=_TAIL_LINES)
        self.url: Optional[str] = None
        self.changed = threading.Condition()
        self.ended = False  # the process has ended and its output was read to the end
        self._path = path
        self._process = process
        self._echo = echo
        self._on_end: Optional[Callable[[], None]] = None
        self._thread = threading.Thread(target=self._follow, name="vllmstat-sidecar-output", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            with open(self._path, encoding="utf-8", errors="replace") as f:
                part = ""
                last_look = False
                while True:
                    got = f.readline()
                    if got.endswith("\n"):
                        self._line(part + got)
                        part = ""
                    elif got:
                        part += got  # the rest of the line is not written yet
                    elif last_look:
                        if part:
                            self._line(part + "\n")
                        break
                    elif self._process.poll() is not None:
                        last_look = True  # read what it wrote before it ended, then stop
                    else:
                        time.sleep(self._POLL)
        except (OSError, ValueError):
            pass
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()
                on_end = self._on_end
            if on_end is not None:
                on_end()

    def _line(self, line: str) -> None:
        with self.changed:
            self.tail.append(line.rstrip("\n"))
            if self.url is None:
                m = _API_LINE.search(line)
                if m:
                    self.url = m.group(1)
            self.changed.notify_all()
        out = sys.stderr if self._echo is True else (self._echo or None)
        if out is not None:
            try:
                out.write(line)
                out.flush()
            except Exception:  # a closed or odd stream must not stop the reading
                pass

    def on_end(self, f: Callable[[], None]) -> None:
        """Calls f once the process has ended and its output was read (at once if it has)."""
        with self.changed:
            self._on_end = f
            ended = self.ended
        if ended:
            f()

    def wait_url(self, deadline: float) -> Optional[str]:
        """Waits until the API's URL is seen, the process ends or the deadline passes."""
        with self.changed:
            while self.url is None and not self.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            return self.url

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _indent(lines: Iterable[str]) -> str:
    return "\n".join("    " + line for line in lines) or "    (nothing)"


def _parent_death_signal() -> Optional[Callable[[], None]]:
    """On Linux, a preexec_fn that has the kernel send the child SIGTERM when its parent dies.

    A trainer killed without running its exit handlers (SIGKILL, an unhandled signal, os._exit)
    then leaves no sidecar behind holding the port and the out_dir. Only from the main thread:
    the signal comes when the thread that started the child ends.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def set_signal() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return set_signal


def _config_file_value(key: str, value: Any) -> Any:
    """A start() setting as vllmstat's config file wants it."""
    if key in ("targets", "sinks", "worker_labels", "file_sd") and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()] if key != "targets" else [value]
    if isinstance(value, (list, tuple)):
        return [_config_file_value("", v) for v in value]
    if isinstance(value, Mapping):
        return {k: _config_file_value(k, v) for k, v in value.items()}
    return value


def _absolute_paths(key: str, value: Any) -> Any:
    """Makes the file paths in a config relative to the working directory, as the trainer meant
    them, instead of to the config file, which start() writes elsewhere."""
    if isinstance(value, Mapping):
        return {k: _absolute_paths(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_absolute_paths(key, v) for v in value]
    if isinstance(value, str) and value and (key == "file_sd" or key.endswith("_file")):
        return os.path.abspath(value)
    return value


def _flag_args(key: str, value: Any) -> List[str]:
    """The `vllmstat run` flags that set a start() setting, beside a config file."""
    flag = _RUN_FLAGS[key]
    if key == "targets":
        return [a for t in ([value] if isinstance(value, str) else value) for a in (flag, str(t))]
    if isinstance(value, bool):
        return [flag + "=" + ("true" if value else "false")]
    if key in ("worker_labels", "sinks") and not isinstance(value, str):
        if key == "sinks" and not all(isinstance(v, str) for v in value):
            raise TypeError("start(): with a config file, sinks= takes sink names (tensorboard, wandb, csv); "
                            "put sinks with settings in the file")
        value = ",".join(value)
    return [flag, str(value)]


def start(config: Union[str, os.PathLike, Mapping[str, Any], None] = None, *, binary: Optional[str] = None,
          echo: Union[bool, IO[str]] = True, start_timeout: float = 60.0, timeout: float = 60.0,
          strict: bool = False, **settings: Any) -> Sidecar:
    """Starts vllmstat as a sidecar of this process and returns a :class:`Sidecar` for it.

    Runs ``vllmstat run`` with the given configuration, waits until its API answers
    ``/healthz``, and returns an object that is also a :class:`Client` for it; the process is
    stopped (SIGTERM) by :meth:`Sidecar.close`, at the end of a ``with`` block, or at
    interpreter exit. On Linux it is also stopped if this process dies without exiting
    (SIGKILL) when started from the main thread.

    Args:
        config: vllmstat's configuration: ``None``, a dict of its keys (as in its YAML file),
            or the path of a YAML file (vllmstat's, or a NeMo-RL config).
        settings: configuration keys, which override ``config``'s: ``targets`` (list of
            ``/metrics`` URLs or ``host:port``), ``out_dir``, ``listen`` (``"127.0.0.1:0"``
            lets the system choose the port; :attr:`Sidecar.url` has it), ``step_every`` (``0``:
            steps end only through :meth:`Client.end_step`), ``interval`` (for
            ``vllm_metrics_logger_interval``), ``sinks`` (names, or dicts with a ``type``),
            ``api_token`` (given to vllmstat in its environment, and used by the client), and
            any other key of vllmstat's config. Beside a config file, only the keys that a flag
            of ``vllmstat run`` sets can be given (``targets``, ``out_dir``, ``listen``,
            ``step_every``, ``interval``, ``scrape_timeout``, ``metric_prefix``, ``per_worker``,
            ``vllm_metrics_log_scalars``, ``record``, ``worker_labels``, ``sinks`` by name).
        binary: the vllmstat binary to run; default :func:`binary_path`.
        echo: where the process's output lines (its step summaries and log) are copied:
            ``True`` for this process's stderr, ``False`` for nowhere, or a text stream. The
            last 40 are kept either way for error messages (:meth:`Sidecar.output`).
        start_timeout: seconds to wait for the API to answer.
        timeout, strict: as for :class:`Client`.

    Raises :class:`VllmstatError` (with the process's last lines) when it exits or does not
    answer within ``start_timeout``, ``FileNotFoundError`` when there is no binary, and
    ``TypeError``/``ValueError`` for settings it cannot pass.
    """
    settings = {_ALIASES.get(k, k): v for k, v in settings.items()}
    token = settings.pop("api_token", None)
    exe = binary or binary_path()
    args = [exe, "run"]
    # A private directory for the run's log and the config file written here (0700: the config
    # may hold credentials), removed when the sidecar is closed.
    cleanup = tempfile.mkdtemp(prefix="vllmstat-sidecar-")
    if config is None or isinstance(config, Mapping):
        merged = {_ALIASES.get(k, k): v for k, v in (config or {}).items()}
        file_token = merged.pop("api_token", None)
        token = token if token is not None else file_token
        merged.update(settings)
        if "listen" in merged and not merged["listen"]:
            shutil.rmtree(cleanup, ignore_errors=True)
            raise ValueError("start(): the sidecar needs its API: listen must be an address, such as 127.0.0.1:0")
        out_dir = merged.get("out_dir")
        if merged:
            path = os.path.join(cleanup, "vllmstat.json")
            body = _absolute_paths("", {k: _config_file_value(k, v) for k, v in merged.items()})
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
                json.dump(body, f, indent=1)
            args += ["--config", path]
    else:
        other = sorted(k for k in settings if k not in _RUN_FLAGS)
        if other:
            shutil.rmtree(cleanup, ignore_errors=True)
            raise TypeError("start(): beside a config file only the settings that flags of vllmstat run set can be "
                            "given (%s); put %s in the file, or pass config as a dict"
                            % (", ".join(sorted(_RUN_FLAGS)), ", ".join(other)))
        if "listen" in settings and not settings["listen"]:
            shutil.rmtree(cleanup, ignore_errors=True)
            raise ValueError("start(): the sidecar needs its API: listen must be an address, such as 127.0.0.1:0")
        args += ["--config", os.fspath(config)]
        try:
            for k, v in settings.items():
                args += _flag_args(k, v)
        except TypeError:
            shutil.rmtree(cleanup, ignore_errors=True)
            raise
        out_dir = settings.get("out_dir")
    env = dict(os.environ)
    if token:
        env["VLLMSTAT_API_TOKEN"] = token
    deadline = time.monotonic() + start_timeout
    log = os.path.join(cleanup, "vllmstat.log")
    try:
        with open(log, "wb") as logf:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                    preexec_fn=_parent_death_signal())
    except BaseException:
        shutil.rmtree(cleanup, ignore_errors=True)
        raise
    output = _Output(log, proc, echo)

    def fail(why: str) -> VllmstatError:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        output.join(5.0)
        shutil.rmtree(cleanup, ignore_errors=True)
        return VllmstatError("vllmstat (%s) %s; its last lines:\n%s" % (" ".join(args[1:]), why, _indent(output.tail)))

    try:
        url = output.wait_url(deadline)
        if url is None:
            if output.ended:
                try:
                    proc.wait(5.0)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is not None:
                raise fail("exited with code %d before its API answered" % proc.returncode)
            raise fail("did not say where its API listens within %gs" % start_timeout)
        probe = Client(url, timeout=2.0, strict=True)
        while True:
            try:
                health = probe._http("GET", "/healthz", None, probe.timeout)
                break
            except VllmstatError as e:
                if proc.poll() is not None:
                    raise fail("exited with code %d before its API answered" % proc.returncode) from None
                if time.monotonic() > deadline:
                    raise fail("did not answer %s/healthz within %gs: %s" % (url, start_timeout, e)) from None
                time.sleep(0.05)
    except BaseException:
        if proc.poll() is None:  # KeyboardInterrupt and the like: leave nothing running
            proc.kill()
            proc.wait()
        shutil.rmtree(cleanup, ignore_errors=True)
        raise
    sidecar = Sidecar(url, proc, output, out_dir=out_dir, token=token or env.get("VLLMSTAT_API_TOKEN"),
                      timeout=timeout, strict=strict, cleanup=cleanup)
    sidecar._version_checked = True
    if isinstance(health, dict):
        _compare_version(url, health, stacklevel=2)
    global _sidecars_at_exit
    with _sidecars_lock:
        _sidecars.add(sidecar)
        if not _sidecars_at_exit:
            atexit.register(_close_sidecars)
            _sidecars_at_exit = True
    return sidecar


def _close_sidecars() -> None:
    with _sidecars_lock:
        running = list(_sidecars)
    for s in running:
        try:
            s.close()
        except Exception:  # at exit, nothing to report to
            pass


# -- in-process engines -------------------------------------------------------------------------
#
# NeMo-RL, veRL and OpenRLHF run vLLM's LLM/AsyncLLM inside a Ray actor, with no HTTP server.
# vLLM records its metrics in the default prometheus_client registry of the process that owns
# the engine, so that process serves the registry itself and tells vllmstat where it is.

# Registration retries: first delay, largest delay, and how long to keep trying before giving up.
_RETRY_FIRST = 0.2
_RETRY_MAX = 10.0
_RETRY_FOR = 15 * 60.0
# One registration or deregistration call. vllmstat answers a registration once it has taken
# the page's first scrape, which it waits for 2 s at most.
_CALL_TIMEOUT = 3.0
# How long expose() waits for the answer to its registration call; the call goes on after that.
_FIRST_WAIT = 0.5
# At exit, how long to wait at most for vllmstat to scrape the page once more.
_EXIT_WAIT_MAX = 5.0
# A kept-alive connection to the page idle this long is closed (its thread ends).
_IDLE_TIMEOUT = 120.0

_expose_lock = threading.Lock()
_exposure = None  # the process's _Exposure, once expose() has served the registry
_at_exit_set = False  # whether _close_at_exit is registered with atexit (a forked child inherits it)


def _close_at_exit():
    """Deregisters this process's page: only a page this process made (not a parent's)."""
    exp = _exposure
    if exp is not None and exp.pid == os.getpid():
        exp.close(stop_serving=False)  # the server thread is a daemon and dies with the process


def _forget_after_fork():
    """In a forked child: the parent's page, its registrations and the locks are the parent's.

    The child serves nothing and deregisters nothing of them; it may call expose() for a page
    of its own. (Locks held by the parent's threads at the fork would stay held forever here.)
    """
    global _exposure, _expose_lock
    _expose_lock = threading.Lock()
    exp, _exposure = _exposure, None
    if exp is not None:
        exp.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def expose(vllmstat: Optional[str] = None, port: int = 0, host: Optional[str] = None,
           token: Optional[str] = None) -> str:
    """Serves this process's Prometheus metrics and registers them with vllmstat.

    Call it in the process that owns the vLLM engine (the Ray actor holding the ``LLM`` or
    ``AsyncLLM``): vLLM records its metrics in that process's default ``prometheus_client``
    registry (or, with ``PROMETHEUS_MULTIPROC_DIR`` set, in that directory, which is then
    served as a whole). Returns the page's URL, ``http://HOST:PORT/metrics``.

    The page answers as ``prometheus_client``'s own does, on connections kept between
    requests. vllmstat's scrapes, which ask for the samples it reads, are rendered from the
    metric objects' values with the same text, for a small part of what prometheus_client's
    rendering costs the engine's process in CPU and GIL time.

    Args:
        vllmstat: base URL of vllmstat's API; defaults to ``VLLMSTAT_URL``, else
            ``http://127.0.0.1:9400``.
        port: port to serve on; 0 takes any free one.
        host: address to serve on and to advertise. By default the loopback address when
            ``vllmstat`` is on loopback, else this machine's address on the interface that
            routes to vllmstat's host. A wildcard (``0.0.0.0``, ``::``) serves on every
            interface and advertises that routed address.
        token: vllmstat's ``api_token``; defaults to ``VLLMSTAT_API_TOKEN``.

    The URL is added to vllmstat's targets (``POST /v1/targets``). vllmstat answers once it has
    taken the page's first scrape (the engines' baseline), and expose() waits 0.5 s at most for
    that answer: when it comes in time, counts made after expose() returns are counted. When it
    does not, expose() returns anyway and the call goes on in the background; vllmstat adds the
    page all the same, and counts made before its first scrape count only if the engine's
    ``_created`` is later than the run's start. If vllmstat is not up yet, registration goes on
    in a background thread, with backoff, for up to 15 minutes. At exit the page waits (a few
    seconds at most) for vllmstat to scrape it once more, so that the last counts land in the
    open step, and removes itself (``DELETE /v1/targets``).

    A process forked after expose() (``multiprocessing``, data loader workers) neither serves
    nor deregisters the parent's page; it may call expose() for a page of its own, which it
    removes when it ends (at interpreter exit, or when ``multiprocessing`` ends it).

    Never raises: a failure warns once and returns the URL anyway (registration pending), or
    ``""`` when the page cannot be served at all. Calling it again returns the same URL and
    registers it again (idempotent; a restarted vllmstat has lost its targets), with another
    vllmstat too if a different one is given; ``port`` and ``host`` of later calls are ignored.
    """
    global _exposure, _at_exit_set
    try:
        vllmstat = _base_url(vllmstat)
        with _expose_lock:
            if _exposure is None:
                bind, advertise = _choose_host(vllmstat, host)
                _exposure = _Exposure(bind, advertise, port, _process_registry())
                if not _at_exit_set:
                    atexit.register(_close_at_exit)
                    _at_exit_set = True
                _close_when_multiprocessing_ends()
            exp = _exposure
        exp.register(vllmstat, token if token is not None else os.environ.get("VLLMSTAT_API_TOKEN") or None)
        return exp.url
    except Exception as e:  # a metrics helper must never take the trainer down
        warnings.warn("vllmstat: cannot serve this process's metrics: %s" % (e,), RuntimeWarning, stacklevel=2)
        return ""


def _close_when_multiprocessing_ends():
    """In a process started by multiprocessing, deregisters also when it ends the process.

    A forked multiprocessing child ends with os._exit, which skips atexit; multiprocessing runs
    its own finalizers first.
    """
    mp = sys.modules.get("multiprocessing")
    if mp is None or mp.parent_process() is None:
        return
    from multiprocessing import util
    util.Finalize(None, _close_at_exit, exitpriority=0)


def ray_targets() -> List[str]:
    """Returns the metrics-agent URL of every alive Ray node: ``http://ADDR:PORT/metrics``.

    With vLLM's Ray stat logger (``RayPrometheusStatLogger``), engine metrics reach Ray's
    per-node metrics agent (as ``ray_vllm_...``, which vllmstat reads). Pass the result to
    :meth:`Client.add_targets` or ``--target``. Needs ``ray.init()`` to have been called.
    """
    try:
        import ray  # type: ignore  # noqa: F401  (imported here so that the rest of the module needs no Ray)
    except ImportError:
        raise ImportError("ray_targets() needs Ray in this Python (pip install ray); "
                          "it reads the nodes' metrics-agent ports from ray.nodes()") from None
    if hasattr(ray, "is_initialized") and not ray.is_initialized():
        raise RuntimeError("ray_targets(): Ray is not initialized in this process; call ray.init() first")
    out = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        addr, port = node.get("NodeManagerAddress"), node.get("MetricsExportPort")
        if not addr or not port:
            continue
        url = "http://%s:%d/metrics" % (_url_host(addr), int(port))
        if url not in out:
            out.append(url)
    return out


def _url_host(addr):
    return "[%s]" % addr if ":" in addr else addr


def _process_registry():
    """The registry vLLM writes to: the default one, or the multiprocess directory's."""
    import prometheus_client
    mp_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")
    if not mp_dir:
        return prometheus_client.REGISTRY
    from prometheus_client import multiprocess
    registry = prometheus_client.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=mp_dir)
    return registry


def _choose_host(vllmstat, host):
    """Returns (address to bind, address to put in the URL) for a page vllmstat must reach."""
    wildcard = host in ("0.0.0.0", "::", "")
    if host is not None and not wildcard:
        return host, host
    routed = _routed_address(vllmstat)
    if wildcard:
        return host, routed
    return routed, routed


def _routed_address(vllmstat):
    """This machine's address on the interface that routes to vllmstat's host.

    Connecting a UDP socket sends nothing; it only makes the kernel pick the source address.
    """
    parts = urllib.parse.urlsplit(vllmstat if "://" in vllmstat else "http://" + vllmstat)
    name = parts.hostname or "127.0.0.1"
    if name == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(name).is_loopback:
            return name
    except ValueError:
        pass  # a host name: resolve it below
    port = parts.port or (443 if parts.scheme == "https" else 80)
    err = None
    for family, _, _, _, addr in socket.getaddrinfo(name, port, 0, socket.SOCK_DGRAM):
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.connect(addr)
            return s.getsockname()[0]
        except OSError as e:
            err = e
        finally:
            s.close()
    raise OSError("no route to vllmstat's host %s: %s (pass host= to expose())" % (name, err))


# -- the page -----------------------------------------------------------------------------------
#
# vllmstat asks a page for only the samples it reads (name[] parameters), every 0.5-1 s.
# prometheus_client answers such a request by collecting every family asked for into Sample
# tuples and formatting sample after sample: about 1 ms for one engine and 8 ms for eight, all of
# it holding the GIL that the engine's own threads need. The page answers that one request from
# the metric objects' values instead, with the text prometheus_client would serve; every other
# request gets prometheus_client's own answer.

# The samples a vllmstat scrape asks a vLLM page for, in vLLM's spelling (internal/scrape's tests
# keep these lists equal to the name[] parameters it sends).
_ASKED_GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "gpu_cache_usage_perc",
                 "num_requests_waiting_by_reason", "engine_sleep_state", "engine_sleep_resource_state",
                 "engine_fully_awake", "engine_pause_state", "rl_weight_update_active")
_ASKED_COUNTERS = ("prefix_cache_queries", "gpu_prefix_cache_queries", "prefix_cache_hits", "gpu_prefix_cache_hits",
                   "num_preemptions", "prompt_tokens", "generation_tokens", "request_success",
                   "external_prefix_cache_queries", "external_prefix_cache_hits", "mm_cache_queries", "mm_cache_hits",
                   "spec_decode_num_drafts", "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens",
                   "spec_decode_num_accepted_tokens_per_pos", "corrupted_requests", "prompt_tokens_by_source",
                   "recomputed_token_executions", "estimated_flops_per_gpu", "estimated_read_bytes_per_gpu",
                   "estimated_write_bytes_per_gpu")
_ASKED_HISTOGRAMS = ("time_to_first_token_seconds", "inter_token_latency_seconds", "time_per_output_token_seconds",
                     "e2e_request_latency_seconds", "request_queue_time_seconds",
                     "request_prefill_kv_computed_tokens", "request_prompt_tokens", "request_generation_tokens",
                     "request_max_num_generation_tokens", "request_prefill_time_seconds",
                     "request_decode_time_seconds", "request_inference_time_seconds", "iteration_tokens_total",
                     "kv_block_lifetime_seconds", "kv_block_idle_before_evict_seconds", "kv_block_reuse_gap_seconds")
_ASKED = frozenset(["vllm:" + g for g in _ASKED_GAUGES]
                   + ["vllm:" + c + s for c in _ASKED_COUNTERS for s in ("_total", "_created")]
                   + ["vllm:" + h + s for h in _ASKED_HISTOGRAMS
                      for s in ("", "_bucket", "_sum", "_count", "_created")])


class _Page:
    """What the page answers for one registry: prometheus_client's own answer (its WSGI app),
    except for vllmstat's restricted request on a single-process registry (_Restricted)."""

    def __init__(self, registry):
        import prometheus_client
        self._app = prometheus_client.make_wsgi_app(registry)
        self._restricted = _Restricted.of(registry)

    def answer(self, method, path, query, accept, accept_encoding):
        """Returns the status line, the headers and the body of the answer."""
        if self._restricted is not None and method == "GET" and path != "/favicon.ico":
            out = self._restricted.answer(query, accept, accept_encoding)
            if out is not None:
                return out
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query}
        if accept is not None:
            environ["HTTP_ACCEPT"] = accept
        if accept_encoding is not None:
            environ["HTTP_ACCEPT_ENCODING"] = accept_encoding
        started = []

        def start_response(status, headers, exc_info=None):
            started.append((status, headers))

        body = b"".join(self._app(environ, start_response))
        status, headers = started[0]
        return status, list(headers), body


class _Restricted:
    """vllmstat's restricted page, rendered from the metric objects' values.

    It answers a request whose name[] parameters are all among the names vllmstat asks for, in
    the text format, and leaves every other request to prometheus_client. It takes the families
    asked for in the order prometheus_client's restricted registry does (a set of collectors
    built the same way). A Counter, Gauge or Histogram of prometheus_client with plain values
    gets a _Template; any other collector is collected and rendered by prometheus_client, on
    every request. Renders may run at the same time (scrapes on two connections): what they
    share is replaced whole, never changed in place.
    """

    def __init__(self, registry, prom):
        self._registry = registry
        self._prom = prom
        self._queries: Dict[str, _Query] = {}  # query string -> its names, collectors, templates
        self._broken = False

    @classmethod
    def of(cls, registry):
        """A _Restricted for registry, or None where prometheus_client's answer is kept.

        In multiprocess mode (PROMETHEUS_MULTIPROC_DIR) the values live in files that a
        MultiProcessCollector reads; that registry is served as prometheus_client serves it.
        """
        from prometheus_client import exposition, metrics, utils, values
        if values.ValueClass is not values.MutexValue:
            return None
        if not (hasattr(registry, "_names_to_collectors") and hasattr(registry, "_lock")):
            return None
        return cls(registry, _Prom(exposition, metrics, utils, values.MutexValue))

    def answer(self, query, accept, accept_encoding):
        """The answer to a request with this query string, or None for prometheus_client's."""
        if self._broken:
            return None
        exposition = self._prom.exposition
        encoder, content_type = exposition.choose_encoder(accept)
        if encoder is not exposition.generate_latest:
            return None  # OpenMetrics, or a text format with other escaping
        q = self._queries.get(query)
        if q is None:
            names = urllib.parse.parse_qs(query).get("name[]")
            if not names or not _ASKED.issuperset(names):
                return None
            if len(self._queries) >= 8:  # vllmstat sends one query; anything else is not kept long
                self._queries = {}
            q = self._queries[query] = _Query(names)
        try:
            body = self.render(q)
        except Exception:  # what prometheus_client would do is unknown here: let it answer
            self._broken = True
            return None
        headers = [("Content-Type", content_type)]
        if exposition.gzip_accepted(accept_encoding):
            import gzip
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, body

    def render(self, q):
        """The text prometheus_client renders for query q, as bytes."""
        registry = self._registry
        with registry._lock:
            found = tuple(map(registry._names_to_collectors.get, q.order))
            # collectors without names are in every restricted page (newer prometheus_client)
            nameless = tuple(getattr(registry, "_collectors_without_names", ()))
        return b"".join([self._part(q, c) for c in q.collectors(found, nameless)])

    def _part(self, q, collector):
        prom = self._prom
        t = q.templates.get(collector)
        if t is _GENERIC:
            return prom.render([collector], q.name_set)
        text = None if t is None else t.fill(collector, prom)
        if text is None:  # no template yet, or one the metric's children outgrew
            t = q.templates[collector] = _Template.make(collector, q.name_set, prom)
            text = None if t is _GENERIC else t.fill(collector, prom)
            if text is None:
                return prom.render([collector], q.name_set)
        return text


class _Prom:
    """The parts of prometheus_client a restricted page uses."""

    def __init__(self, exposition, metrics, utils, mutex_value):
        self.exposition, self.metrics, self.mutex_value = exposition, metrics, mutex_value
        self.go_float = utils.floatToGoString
        self.kinds = {metrics.Counter: "counter", metrics.Gauge: "gauge", metrics.Histogram: "histogram"}

    def render(self, collectors, name_set):
        """prometheus_client's text of these collectors restricted to name_set."""
        restricted = []
        for c in collectors:
            for m in c.collect():
                r = m._restricted_metric(name_set)
                if r:
                    restricted.append(r)
        return self.exposition.generate_latest(_Collected(restricted))


class _Collected:
    def __init__(self, metrics):
        self._metrics = metrics

    def collect(self):
        return self._metrics


class _Query:
    """One name[] query: its set of names as prometheus_client builds it, the collectors it
    finds, and a template per collector."""

    def __init__(self, names):
        # RestrictedRegistry's set, made as prometheus_client makes it (a set of a set), so
        # that the collectors found come in its order
        self.name_set = set(set(names))
        self.order = tuple(self.name_set)
        self.templates: Dict[Any, Any] = {}
        self._found: Optional[tuple] = None

    def collectors(self, found, nameless):
        """The collectors of the page in prometheus_client's order, for the collectors found
        by name (in self.order, None where none) and the collectors without names."""
        last = self._found
        if last is not None and last[0] == found and last[1] == nameless:
            return last[2]
        cs = set(nameless)
        for c in found:
            if c is not None:
                cs.add(c)
        order = list(cs)
        self.templates = {c: t for c, t in self.templates.items() if c in cs}
        self._found = (found, nameless, order)
        return order


_VALUE = operator.attrgetter("_value")
_CREATED = operator.attrgetter("_created")
_NEG_INF = float("-inf")
# a gauge given a function (set_function) has its own _child_samples
_HAS_FUNCTION = operator.methodcaller("__contains__", "_child_samples")


class _Template:
    """One metric's part of a restricted page: prometheus_client's text of it with every value
    left out ("%s"), and how to read those values from the metric's objects.

    It is made from prometheus_client's own rendering, and kept only if filling it with the
    values read gives that rendering exactly. The _created samples (the children's creation
    times) are written into it. It holds while the metric has the same children with the same
    creation times, and the same setting for _created samples; a gauge given a function
    (set_function) is rendered by prometheus_client. A counter's or histogram's fill that reads
    the values of the last fill reuses its text: an idle engine's page costs little more than
    reading its values.
    """

    def __init__(self, kind, kids, created, read, templates, counts, go_float):
        self.kind, self.kids, self.created = kind, kids, created
        self._read, self._go_float = read, go_float
        self._general, self._whole = templates
        self._counts = counts
        self._last: tuple = (None, b"")

    @staticmethod
    def make(collector, name_set, prom):
        """A _Template for collector, or _GENERIC when prometheus_client must render it."""
        kind = prom.kinds.get(type(collector))
        if kind is None:
            return _GENERIC
        use_created = prom.metrics._use_created
        name = collector._name
        go = prom.go_float
        for _ in range(3):  # the engine may change a value between the two readings
            kids = _children(collector)
            made = _Template._reader(kind, name, kids, prom.mutex_value)
            if made is None:
                return _GENERIC
            read, names = made
            asked = [i for i, n in enumerate(names) if n in name_set]
            if len(asked) < len(names):
                read = _then(read, _getter(asked))
            created = None
            if use_created and kind != "gauge" and name + "_created" in name_set:
                created = tuple(map(_CREATED, kids))
            values = read()
            text = prom.render([collector], name_set).decode("utf-8")
            segments = _segments(text)
            n = len(values)
            if segments is None or len(segments) != 1 + n + len(created or ()):
                continue
            # the _created samples are the last of the text: one per child, in the same order
            fixed = [go(c) for c in created or ()]
            counted = [j for j, i in enumerate(asked) if kind == "histogram" and not names[i].endswith("_sum")]
            counting = set(counted)

            def template(count_format):
                return segments[0] + "".join(
                    (fixed[i - n] if i >= n else count_format if i in counting else "%s") + s
                    for i, s in enumerate(segments[1:]))

            general = template("%s")
            if general % tuple(map(go, values)) != text:
                continue
            # cumulative counts are integers while each observation adds 1: "%d.0" writes one
            # below 1e6 as repr does, faster
            whole = template("%d.0") if counted else None
            return _Template(kind, kids, (use_created, created), read, (general, whole), _getter(counted), go)
        return _GENERIC

    @staticmethod
    def _reader(kind, name, kids, mutex):
        """(a function reading the values but _created as a tuple, the sample name of each value),
        in the order of prometheus_client's text; None when a child's values are not plain
        values."""
        if kind == "histogram":
            series = [(k._buckets, k._sum, k._upper_bounds[0] >= 0) for k in kids]
            if any(type(v) is not mutex for b, total, _ in series for v in [total, *b]):
                return None
            names = []
            for buckets, _, with_sum in series:
                names += [name + "_bucket"] * len(buckets) + [name + "_count"] + [name + "_sum"] * with_sum

            def read():
                out: List[float] = []
                for buckets, total, with_sum in series:
                    # cumulative counts, added in prometheus_client's order (from 0.0)
                    counts = itertools.accumulate(map(_VALUE, buckets), initial=0.0)
                    next(counts)
                    out += counts
                    out.append(out[-1])
                    if with_sum:
                        out.append(float(total._value))
                return tuple(out)

            return read, names
        objs = [k._value for k in kids]
        if any(type(v) is not mutex for v in objs):
            return None
        if kind == "gauge" and any(map(_HAS_FUNCTION, map(vars, kids))):
            return None  # set_function
        sample = name + "_total" if kind == "counter" else name
        return (lambda: tuple(map(float, map(_VALUE, objs)))), [sample] * len(kids)

    def fill(self, collector, prom):
        """The metric's text now, or None when the template no longer renders it."""
        use_created, created = self.created
        kids = self.kids
        if prom.metrics._use_created != use_created or _children(collector) != kids:
            return None
        if created is not None and tuple(map(_CREATED, kids)) != created:
            return None  # a counter reset (prometheus_client 0.21 and later)
        if self.kind == "gauge" and any(map(_HAS_FUNCTION, map(vars, kids))):
            return None  # set_function
        values = self._read()
        last = self._last
        # == takes -0.0 for 0.0: a gauge can be set to either, but the sums and counts of
        # counters and histograms start at 0.0 and only add, which never gives -0.0
        if values == last[0] and self.kind != "gauge":
            return last[1]
        text = None
        if values:
            total = sum(values)
            if total - total != 0.0 or max(values) >= 1e6:
                # NaN, infinities, or a value Go writes with an exponent (prometheus_client's
                # floatToGoString); any other float is Python's repr, which "%s" writes
                go = self._go_float
                text = self._general % tuple([v if _NEG_INF < v < 1e6 else go(v) for v in values])
            elif self._whole is not None and all(map(float.is_integer, self._counts(values))):
                text = self._whole % values
        if text is None:
            text = self._general % values
        out = text.encode("utf-8")
        self._last = (values, out)
        return out


_GENERIC: Any = object()  # a collector that prometheus_client renders


def _children(metric):
    """A metric's children as prometheus_client collects them: itself when it has no labels."""
    if metric._labelnames and not metric._labelvalues:
        with metric._lock:
            return tuple(metric._metrics.values())
    return (metric,)


def _getter(indices):
    """A function returning a tuple of the items at indices of a sequence."""
    if len(indices) == 1:
        i = indices[0]
        return lambda values: (values[i],)
    if not indices:
        return lambda values: ()
    return operator.itemgetter(*indices)


def _then(f, g):
    return lambda: g(f())


def _segments(text):
    """text cut before and after each sample's value, with "%" written "%%"; None when a line is
    neither "# ..." nor "name{labels} value"."""
    out = []
    part = []
    for line in text.split("\n")[:-1]:
        line = line.replace("%", "%%")
        if line.startswith("#"):
            part.append(line + "\n")
            continue
        cut = line.rfind(" ")
        if cut < 0:
            return None
        part.append(line[:cut + 1])
        out.append("".join(part))
        part = ["\n"]
    out.append("".join(part))
    return out


class _Exposure:
    """An HTTP server for one registry, and its registrations with vllmstat instances."""

    def __init__(self, bind, advertise, port, registry):
        self._page = _Page(registry)
        self.pid = os.getpid()
        self._cond = threading.Condition()
        # vllmstat's scrapes of this page (User-Agent "vllmstat"): how many were answered, when
        # the last one began and the time between the last two, for the wait at exit.
        self._answered = 0
        self._last_begin = None
        self._gap = None
        server_class = _Server6 if ":" in bind else _Server
        self._server = server_class((bind, port), _Handler)
        self._server.answer = self._answer
        self.url: str = "http://%s:%d/metrics" % (_url_host(advertise), self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, name="vllmstat-metrics", daemon=True)
        self._thread.start()
        self._regs = {}
        self._closed = False

    def _answer(self, method, target, headers):
        """The answer to one request: the page, or prometheus_client's answer."""
        began = time.monotonic()
        path, _, query = target.partition("?")
        out = self._page.answer(method, urllib.parse.unquote(path, "iso-8859-1"), query, headers.get("accept"),
                                headers.get("accept-encoding"))
        if headers.get("user-agent", "").startswith("vllmstat"):
            with self._cond:
                if self._last_begin is not None:
                    self._gap = began - self._last_begin
                self._last_begin = began
                self._answered += 1
                self._cond.notify_all()
        return out

    def register(self, vllmstat, token):
        key = vllmstat.rstrip("/")
        with self._cond:
            if self._closed:
                return
            reg = self._regs.get(key)
            if reg is None:
                client = Client(key, token=token, timeout=_CALL_TIMEOUT, strict=True)
                client._version_checked = True  # the trainer's client warns; a registration stays quiet
                reg = _Registration(client, self.url)
                self._regs[key] = reg
        # again on a later call (adding is idempotent): a restarted vllmstat has lost its targets
        reg.start(_FIRST_WAIT)

    def forget(self):
        """In a forked child: lets go of the parent's listening socket and kept connections (this
        process's copies: the parent serves on), touching nothing else."""
        # no lock: a thread of the parent may have held it at the fork, and none runs here
        for sock in [self._server.socket, *self._server._conns]:
            try:
                sock.close()
            except OSError:
                pass

    def close(self, stop_serving=True):
        """Deregisters everywhere (after one more scrape when vllmstat is scraping) and stops serving."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            regs = list(self._regs.values())
        for reg in regs:
            try:
                if reg.stop():
                    self._await_last_scrape(reg)
                    reg.deregister()
            except Exception:  # at exit, nothing to report to
                pass
        if stop_serving:
            self._server.shutdown()
            self._server.server_close()

    def _await_last_scrape(self, reg):
        """Waits, bounded, until vllmstat has taken and processed a page made from now on.

        Only when vllmstat is scraping this page (it did recently): the wait is then about one
        interval. "Processed" is read from vllmstat's own count of good scrapes of this target,
        which catches up with the pages answered here once the last one has been taken in.
        """
        now = time.monotonic()
        with self._cond:
            if self._last_begin is None:
                return
            gap = self._gap or 1.0
            if now - self._last_begin > max(3.0, 10 * gap):
                return  # vllmstat stopped scraping (gone, or the target was removed)
            deadline = now + min(_EXIT_WAIT_MAX, 1.0 + 4 * gap)
            while self._last_begin <= now:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)
        while time.monotonic() < deadline:
            with self._cond:
                answered = self._answered
            state = reg.target_state()
            if state is None or state.get("scrapes", 0) - state.get("failures", 0) >= answered:
                return
            time.sleep(min(0.02, gap / 4))


class _Registration:
    """Keeps one page registered with one vllmstat: tries in a background thread, with backoff."""

    def __init__(self, client, url):
        self.client = client
        self.url = url
        self._call = threading.Lock()  # held during each call, so that stop() sees a settled state
        self._state = threading.Lock()  # guards _running; never held during a call
        self._stop = threading.Event()
        self._registered = False
        self._running = False  # a registration thread is under way
        self._warned = False

    def start(self, wait):
        """Registers in a background thread, waiting up to ``wait`` seconds for its first try.

        Does nothing while a thread is under way already (it goes on trying).
        """
        with self._state:
            if self._running or self._stop.is_set():
                return
            self._running = True
        first = threading.Event()
        try:
            threading.Thread(target=self._run, args=(first,), name="vllmstat-register", daemon=True).start()
        except BaseException:
            with self._state:
                self._running = False
            raise
        first.wait(wait)

    def _run(self, first):
        try:
            done = self._attempt()
            first.set()
            if done:
                return
            delay = _RETRY_FIRST
            give_up = time.monotonic() + _RETRY_FOR
            while not self._stop.wait(delay):
                if self._attempt():
                    return
                if time.monotonic() >= give_up:
                    self._warned = False
                    self._warn("gave up registering %s with %s; add it with Client.add_targets" % (self.url, self.client.url))
                    return
                delay = min(delay * 2, _RETRY_MAX)
        finally:
            first.set()
            with self._state:
                self._running = False

    def _attempt(self):
        """Tries once; returns True when there is nothing more to try (done or hopeless)."""
        with self._call:
            if self._stop.is_set():
                return True
            try:
                self.client.add_targets([self.url])
            except VllmstatError as e:
                hopeless = e.status is not None and 400 <= e.status < 500
                self._warn("cannot register %s with %s: %s%s" % (
                    self.url, self.client.url, e,
                    "" if hopeless else "; retrying in the background for up to %d minutes" % (_RETRY_FOR // 60)))
                return hopeless
            self._registered = True
            self._warned = False  # a later failure is news again
            return True

    def _warn(self, msg):
        if not self._warned:
            self._warned = True
            warnings.warn("vllmstat: " + msg, RuntimeWarning, stacklevel=2)

    def stop(self):
        """Stops retrying; returns whether the page is registered, once a call under way has ended.

        That call ends within its timeout; should it not, the page counts as not registered.
        """
        self._stop.set()
        if self._call.acquire(timeout=_CALL_TIMEOUT + 1.0):
            self._call.release()
            return self._registered
        return False

    def target_state(self):
        try:
            live = self.client.live()
        except VllmstatError:
            return None
        for t in live.get("targets", []):
            if t.get("url") == self.url:
                return t
        return None

    def deregister(self):
        try:
            self.client.remove_targets([self.url])
        except VllmstatError:
            pass  # vllmstat is gone; so is the target


# Limits of a request to the page: the request line or a header line (vllmstat's request line
# carries a few kilobytes of names), the number of headers, and a body that is read and dropped
# (a larger one closes the connection after the answer).
_MAX_LINE = 65536
_MAX_HEADERS = 100
_MAX_BODY = 65536
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_SERVER_ERROR = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _read_request(rfile):
    """Reads one request's line and headers: (method, target, version, headers by lower-case
    name), None at the end of the connection, or "bad" for what is not an HTTP/1.x request."""
    line = rfile.readline(_MAX_LINE + 1)
    if not line:
        return None
    parts = line.decode("iso-8859-1").split()
    if len(parts) != 3 or not line.endswith(b"\n") or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return "bad"
    headers: Dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        line = rfile.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):
            return parts[0], parts[1], parts[2], headers
        name, colon, value = line.decode("iso-8859-1").partition(":")
        if not colon or not line.endswith(b"\n") or name[:1].isspace() or name != name.rstrip():
            return "bad"  # the end of the connection, an overlong line, or not a header
        name, value = name.lower(), value.strip()
        headers[name] = headers[name] + ", " + value if name in headers else value
    return "bad"


def _keep_alive(version, headers):
    """Whether a connection goes on after this request (HTTP/1.1 unless the client closes it;
    HTTP/1.0 only when the client asks)."""
    tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


_last_date: Tuple[int, str] = (0, "")  # the second a Date header was last made for, and the header


def _date():
    global _last_date
    now = int(time.time())
    if _last_date[0] != now:
        import email.utils
        _last_date = (now, email.utils.formatdate(now, usegmt=True))
    return _last_date[1]


def _server_classes():
    import socketserver

    class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
        """Answers scrapes concurrently (a boundary scrape may overlap a regular one), each
        connection in a thread of its own.

        Connections are kept alive between requests: a scrape on a new connection costs the
        engine's process an accepted socket and a new thread, more CPU than rendering the page.
        Closing the server closes the kept connections too.
        """

        daemon_threads = True
        allow_reuse_address = True
        answer: Callable[[str, str, Dict[str, str]], Any]

        def __init__(self, *args):
            self._conns: set = set()
            self._conns_lock = threading.Lock()
            super().__init__(*args)

        def server_bind(self):
            socketserver.TCPServer.server_bind(self)
            host, port = self.server_address[:2]
            self.server_name, self.server_port = str(host), int(port)

        def process_request_thread(self, request, client_address):
            with self._conns_lock:
                self._conns.add(request)
            try:
                super().process_request_thread(request, client_address)
            finally:
                with self._conns_lock:
                    self._conns.discard(request)

        def server_close(self):
            super().server_close()
            with self._conns_lock:
                conns = list(self._conns)
            for conn in conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # the connection's thread reads the end and returns
                except OSError:
                    pass

    class Server6(Server):
        address_family = socket.AF_INET6

    class Handler(socketserver.StreamRequestHandler):
        """Answers the requests of one connection, one after another, until the client closes
        it or asks to, sends what is not an HTTP/1.x request, or stays idle for _IDLE_TIMEOUT.

        HTTP is read here rather than by http.server, whose header parsing (the email package)
        costs a scrape more than rendering a one-engine page.
        """

        disable_nagle_algorithm = True  # an answer goes out in one write
        timeout = _IDLE_TIMEOUT

        def handle(self):
            try:
                while self._answer_one():
                    pass
            except OSError:
                pass  # the client went away, or stayed idle too long

        def _answer_one(self):
            """Answers one request; returns whether the connection goes on."""
            request = _read_request(self.rfile)
            if request is None:
                return False
            if request == "bad":
                self.connection.sendall(_BAD_REQUEST)
                return False
            method, target, version, headers = request
            keep = _keep_alive(version, headers)
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                self.connection.sendall(_BAD_REQUEST)
                return False
            if "transfer-encoding" in headers or not 0 <= length <= _MAX_BODY:
                keep = False  # a body the page does not read: the connection cannot go on
            elif length:
                self.rfile.read(length)
            try:
                status, fields, body = self.server.answer(method, target, headers)  # type: ignore[attr-defined]
            except Exception:  # a collector that fails: said on stderr, as prometheus_client's server does
                import traceback
                traceback.print_exc()
                self.connection.sendall(_SERVER_ERROR)
                return False
            head = ["HTTP/1.1 " + status, "Date: " + _date()]
            head += ["%s: %s" % (k, v) for k, v in fields if k]  # prometheus_client answers /favicon.ico with ""
            head.append("Content-Length: %d" % len(body))
            if not keep:
                head.append("Connection: close")
            elif version == "HTTP/1.0":
                head.append("Connection: keep-alive")
            out = ("\r\n".join(head) + "\r\n\r\n").encode("iso-8859-1")
            self.connection.sendall(out if method == "HEAD" else out + body)
            return keep

    return Server, Server6, Handler


_Server, _Server6, _Handler = _server_classes()
