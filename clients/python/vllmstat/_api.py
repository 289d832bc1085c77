"""The client of vllmstat's HTTP API: :class:`Client`, which the package offers as
``vllmstat.Client`` and ``vllmstat.client.Client``.

The package's modules import one way, each only modules below it: ``_common`` and
``_settings`` at the bottom; this module (the HTTP client, standard library only) and ``page``
above them; ``sidecar`` (a :class:`Client` that runs vllmstat as a child process) and
``exposition`` (a page that registers itself with a :class:`Client`) above those; and on top
``client``, which offers every public name, the record helpers and this module's names.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, SupportsIndex, Tuple, Union

from ._common import Record, VllmstatError, _base_url, _NoAnswer, _warn, _whole, __version__


def _traced(body: Dict[str, Any], traceparent: Optional[str] = None) -> Dict[str, Any]:
    """body with the trainer's span as "traceparent": the one given, else the current
    OpenTelemetry span's (none without the opentelemetry package, which is not imported until a
    call, or without a span); ``""`` adds none."""
    if traceparent is None:
        try:
            from opentelemetry import propagate  # type: ignore[import]
        except ImportError:
            return body
        carrier: Dict[str, str] = {}
        propagate.inject(carrier)
        traceparent = carrier.get("traceparent")
    if traceparent:
        body["traceparent"] = traceparent
    return body

#: What the client takes as a step number or policy version: an int, another integer type
#: (numpy's), or a float with no fraction (2.0).
Number = Union[SupportsIndex, float]

# What vllmstat accepts as a phase name (it also refuses the names of its step keys).
_PHASE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
# A path's route, the kind of call it is: its numbers and query left out.
_ROUTE_PARTS = re.compile(r"/[0-9]+(?=/|$)")
# The kind of failure of every call that got no answer (or one that is not vllmstat's).
_UNANSWERED = ("unanswered",)


class Client:
    """Talks to one vllmstat sidecar.

    Args:
        url: base URL of the API (``listen`` in vllmstat's config; ``host:port`` is read as
            ``http://host:port``). Defaults to the ``VLLMSTAT_URL`` environment variable, else
            ``http://127.0.0.1:9400``, vllmstat's default. User info in it (``user:password@``,
            for a proxy in front of vllmstat) is sent as basic auth when there is no token,
            and left out of :attr:`url`, which messages show.
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
        clock: the monotonic clock in seconds that ``probe_every`` and ``warn_every`` are read on.
        warn_every: seconds between two warnings of the same kind of failure (a step number
            vllmstat refuses, a bad phase name, no connection, ...). The calls that fail in
            between are counted, and the next warning of that kind gives their count.

    After its first answered call the client asks ``/healthz`` for vllmstat's version, once,
    and warns (once per process and vllmstat) when it is not this client's ``__version__``.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, timeout: float = 60.0,
                 strict: bool = False, hang_timeout: float = 15.0, probe_timeout: float = 1.0,
                 probe_every: float = 5.0, clock: Callable[[], float] = time.monotonic,
                 warn_every: float = 60.0) -> None:
        if not 0 < probe_timeout < hang_timeout:
            raise ValueError("probe_timeout must be > 0 and less than hang_timeout, got %r and %r"
                             % (probe_timeout, hang_timeout))
        # A URL's user info becomes basic auth: kept out of url, which messages show.
        self.url, self._basic = _split_userinfo(_base_url(url))
        self.token = token if token is not None else os.environ.get("VLLMSTAT_API_TOKEN") or None
        self.timeout = timeout
        self.strict = strict
        self.hang_timeout = hang_timeout
        self.probe_timeout = probe_timeout
        self.probe_every = probe_every
        self.clock = clock
        self.warn_every = warn_every
        # Why vllmstat counts as not answering (None while it answers), and when to ask again.
        self._silent: Optional[str] = None
        self._next_probe = 0.0
        # For each kind of failure warned about: when it may be warned about again, and how
        # many failures of it were not warned about since its last warning.
        self._quiet: Dict[Any, List[Any]] = {}
        self._version_checked = False

    # -- calls ------------------------------------------------------------------------------

    def end_step(self, step: Number, traceparent: Optional[str] = None) -> Record:
        """Ends training step ``step`` and returns its record (``{}`` on failure).

        Step numbers are whole numbers from 0 to 2**53 (an int, numpy's integers, or a float
        such as 2.0) that must increase; they may skip (log every 5th step, say). Another value
        is refused before any request: ``ValueError`` when strict, else a warning and ``{}``.

        ``traceparent`` is the trainer's span as a W3C traceparent, which vllmstat's span of the
        step (the ``otlp`` sink's, with ``spans: true``) is made a child of. By default it is
        the current span's when the ``opentelemetry`` package is installed and a span is
        recording, and nothing is sent without one; ``""`` sends none.
        """
        n = self._number(step, "step")
        if n is None:
            return {}
        return self._call("POST", "/v1/steps/end", _traced({"step": n}, traceparent), empty={})

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
                _warn("vllmstat: %s" % e, stacklevel=3)
            raise
        self._phase_edge("end", name, depth=3)

    def set_policy_version(self, version: Number, name: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """Says that the trainer published version ``version`` of its weights now; returns
        ``{"version", "ts"}`` (with ``"name"`` when given) once it took effect (``None`` on
        failure).

        ``name`` is the string the engines will report for this version once they load it: the
        ``weight_version`` the trainer passes to vLLM's ``/finish_weight_update`` or
        ``/update_weight_version``, or to SGLang's updates, such as ``"step-42"``. Engines keep
        their version as such a string; vllmstat matches it to the version named so. Without a
        name, a string that ends in the version's number (``"step-42"``) is that version, and
        ``"default"``, what both engines report before any update, is the first version
        published. A name is 1 to 256 bytes of printable text, names one version only, and is
        not a number other than ``version``; another is refused as a bad version is.

        Versions are whole numbers from 0 to 2**53 (as for :meth:`end_step`) that only grow, such as the step whose
        update made the weights: a version not greater than the last one is refused (409). Call
        it as soon as the trainer has the new weights, before the engines load them: an engine
        that reports no version of its own is taken to hold it from the end of its first pause,
        sleep, waking or weight load that starts after the call. Like a phase edge, the publish
        takes effect after a boundary scrape of every engine, so the call takes about as long
        as :meth:`end_step`. The step records then say which engines are behind and how many
        tokens they generated on older weights. Never raises unless the client is strict; a
        refusal is warned about as other failures are (see ``warn_every``).
        """
        n = self._number(version, "policy version")
        if n is None:
            return None
        body = {"version": n}
        if name is not None:
            if not self._valid_version_name(name):
                return None
            body["name"] = name
        return self._call("POST", "/v1/policy", body, empty=None, version_check=False)

    def live(self) -> Dict[str, Any]:
        """Returns the open step so far and every target's state: ``{"step": ..., "targets": [...]}``."""
        return self._call("GET", "/v1/live", empty={})

    def steps(self, since: Number = 0) -> List[Record]:
        """Returns the closed steps numbered ``since`` or later that vllmstat keeps in memory."""
        n = self._number(since, "since")
        if n is None:
            return []
        out = self._call("GET", "/v1/steps?" + urllib.parse.urlencode({"since": n}), empty={})
        return out.get("steps", []) if out else []

    def step(self, number: Number) -> Record:
        """Returns one closed step's record (``{}`` if unknown or on failure)."""
        n = self._number(number, "step number")
        if n is None:
            return {}
        return self._call("GET", "/v1/steps/%d" % n, empty={})

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
        # a refusal is a kind of its own for each phase: ending "eval" when it is not open is
        # not the mistake of ending "rollout" when it is not
        # the trainer's span goes too, for a step end given none
        return self._call("POST", "/v1/phases/" + edge, _traced({"phase": name}), stacklevel=depth + 3, detail=name,
                          version_check=False)

    def _valid_phase(self, name, depth):
        """Checks a phase name before any request: raises when strict, else warns (per name)."""
        if isinstance(name, str) and _PHASE_NAME.fullmatch(name):
            return True
        msg = ("vllmstat: phase name %r: want a lower-case letter, then up to 31 lower-case letters, "
               "digits or underscores" % (name,))
        if self.strict:
            raise ValueError(msg)
        self._warn_limited(("name", type(name).__name__, repr(name)), msg + "; skipping the call",
                           stacklevel=depth + 2)
        return False

    def _valid_version_name(self, name):
        """Checks a version's name before any request: raises when strict, else warns."""
        if isinstance(name, str) and name and name.isprintable() and len(name.encode("utf-8", "replace")) <= 256:
            return True
        shown = repr(name)  # repr escapes control characters: the warning prints no raw bytes
        if len(shown) > 40:
            shown = shown[:37] + "..."
        msg = "vllmstat: policy version name %s: want 1 to 256 bytes of printable text, such as 'step-42'" % shown
        if self.strict:
            raise ValueError(msg)
        # stacklevel: _warn_limited, this, set_policy_version, the trainer's line
        self._warn_limited(("argument", "policy version name"), msg + "; skipping the call", stacklevel=4)
        return False

    def _number(self, value, what):
        """A step number or version as an int; None, with a warning, for another value (ValueError when strict)."""
        try:
            return _whole(value, what)
        except ValueError as e:
            if self.strict:
                raise
            # stacklevel: _warn_limited, this, the public method, the trainer's line
            self._warn_limited(("argument", what), "vllmstat: %s; skipping the call" % e, stacklevel=4)
            return None

    def _warn_limited(self, kind, msg, stacklevel):
        """Warns about a failure of this kind unless one was warned about less than warn_every
        seconds ago; then it is counted, and the next warning of the kind gives the count.
        stacklevel counts from here, as warnings.warn's from its caller."""
        now = self.clock()
        quiet = self._quiet.get(kind)
        if quiet is not None and now < quiet[0]:
            quiet[1] += 1
            return
        if quiet is not None and quiet[1]:
            msg += " (%d more like it since the last warning)" % quiet[1]
        self._quiet[kind] = [now + self.warn_every, 0]
        _warn(msg, stacklevel)

    def _call(self, method, path, body=None, empty=None, stacklevel=4, detail=None, version_check=True):
        """One call; on failure raises when strict, else warns (see warn_every) and returns empty.

        stacklevel is the trainer's line as seen from _warn_limited: by default it, this, the
        public method and the trainer's. version_check: the first answered call asks for
        vllmstat's version (the calls that change its state leave that to the others).
        """
        try:
            out = self._request(method, path, body)
        except VllmstatError as e:
            if self.strict:
                raise
            if e.status is None:
                kind: Tuple[Any, ...] = _UNANSWERED
            else:  # an answer: this route refuses this call
                kind = (method, _ROUTE_PARTS.sub("/{n}", path.partition("?")[0]), e.status, detail)
            self._warn_limited(kind, "vllmstat: %s" % e, stacklevel)
            return empty
        quiet = self._quiet.get(_UNANSWERED)
        if quiet is not None:
            quiet[0] = 0.0  # it answers: the next failure to get an answer is news at once
        if version_check and not self._version_checked and path != "/healthz":
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
        elif self._basic:
            headers["Authorization"] = "Basic " + self._basic
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
    _warn("vllmstat: the vllmstat at %s %s, this client is version %s; records and calls may "
          "differ from what this client documents" % (url, said, __version__), stacklevel=stacklevel + 1)


def _split_userinfo(url: str) -> Tuple[str, Optional[str]]:
    """The URL without its user info, and that user info as basic-auth credentials (or None)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    creds = "%s:%s" % (urllib.parse.unquote(user), urllib.parse.unquote(password))
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), base64.b64encode(creds.encode()).decode()
