"""Client for vllmstat's HTTP API, for training loops.

One file, standard library only (Python 3.9+): copy it next to your trainer or import it.

vllmstat runs beside the trainer as a sidecar (``vllmstat run --step-every 0``). At the end of
each training step the trainer calls :meth:`Client.end_step`; vllmstat scrapes every vLLM
engine once more, closes the step and returns its record, whose ``"metrics"`` are a flat dict of
numbers (``"vllm/prefix_cache_hit_rate"``, ``"vllm/num_preemptions"``, ...) ready to log on the
trainer's own step axis.

A metrics sidecar must never crash a training run: by default a connection failure or an error
answer makes a call return an empty result and warn once, with the reason, until vllmstat
answers again. ``strict=True`` raises :class:`VllmstatError` instead.

Example::

    from vllmstat_client import Client, log_to

    vs = Client()                       # http://127.0.0.1:9400, VLLMSTAT_API_TOKEN if set
    for step in range(num_steps):
        batch = generate_rollouts(...)
        record = vs.end_step(step)      # {} if vllmstat is unreachable
        metrics.update(record.get("metrics", {}))
        train(batch)
        log_to(wandb_run, record)       # or merge into your own logger's dict
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request
import warnings

__all__ = ["Client", "VllmstatError", "log_to"]


class VllmstatError(Exception):
    """A call to vllmstat failed: no connection, or an error answer.

    ``status`` is the HTTP status code (``None`` when there was no answer).
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class Client:
    """Talks to one vllmstat sidecar.

    Args:
        url: base URL of the API (``listen`` in vllmstat's config).
        token: bearer token (``api_token``); defaults to the ``VLLMSTAT_API_TOKEN`` environment
            variable.
        timeout: seconds to wait for an answer. Ending a step waits for one scrape of every
            engine, at most twice vllmstat's scrape timeout.
        strict: raise :class:`VllmstatError` on failure instead of warning and returning empty.
    """

    def __init__(self, url="http://127.0.0.1:9400", token=None, timeout=60.0, strict=False):
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("VLLMSTAT_API_TOKEN") or None
        self.timeout = timeout
        self.strict = strict
        self._failing = False

    # -- calls ------------------------------------------------------------------------------

    def end_step(self, step):
        """Ends training step ``step`` and returns its record (``{}`` on failure).

        Step numbers must increase; they may skip (log every 5th step, say).
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError("step must be an int >= 0, got %r" % (step,))
        return self._call("POST", "/v1/steps/end", {"step": step}, empty={})

    def live(self):
        """Returns the open step so far and every target's state: ``{"step": ..., "targets": [...]}``."""
        return self._call("GET", "/v1/live", empty={})

    def steps(self, since=0):
        """Returns the closed steps numbered ``since`` or later that vllmstat keeps in memory."""
        out = self._call("GET", "/v1/steps?" + urllib.parse.urlencode({"since": int(since)}), empty={})
        return out.get("steps", []) if out else []

    def step(self, number):
        """Returns one closed step's record (``{}`` if unknown or on failure)."""
        return self._call("GET", "/v1/steps/%d" % int(number), empty={})

    def set_targets(self, urls):
        """Replaces the scraped targets (http/https ``/metrics`` URLs); returns them as vllmstat keeps them."""
        out = self._call("PUT", "/v1/targets", {"targets": list(urls)}, empty={})
        return out.get("targets", []) if out else []

    def targets(self):
        """Returns the current targets."""
        out = self._call("GET", "/v1/targets", empty={})
        return out.get("targets", []) if out else []

    def health(self):
        """Returns True when vllmstat answers its health check."""
        out = self._call("GET", "/healthz", empty={})
        return bool(out) and out.get("status") == "ok"

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, method, path, body=None, empty=None):
        try:
            out = self._request(method, path, body)
        except VllmstatError as e:
            if self.strict:
                raise
            if not self._failing:
                self._failing = True
                warnings.warn("vllmstat: %s (further failures are silent until it answers again)" % e,
                              RuntimeWarning, stacklevel=3)
            return empty
        self._failing = False
        return out

    def _request(self, method, path, body):
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                msg = json.loads(raw.decode()).get("error") or raw.decode(errors="replace")
            except (ValueError, AttributeError):
                msg = raw.decode(errors="replace")[:200]
            raise VllmstatError("%s %s: HTTP %d: %s" % (method, path, e.code, msg), e.code) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise VllmstatError("%s %s: cannot reach %s: %s" % (method, path, self.url, reason)) from None
        try:
            return json.loads(raw.decode())
        except ValueError:
            raise VllmstatError("%s %s: answer is not JSON: %r" % (method, path, raw[:200])) from None


def log_to(run, record, images=False, out_dir=None, prefix=""):
    """Logs a step record's metrics to ``run`` at ``step=record["step"]``.

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
    metrics = {prefix + k: v for k, v in record.get("metrics", {}).items()}
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
