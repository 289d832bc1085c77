"""In-process engines: :func:`expose` serves this process's Prometheus metrics on a page of its
own (:mod:`vllmstat.page`) and keeps it registered with vllmstat; :func:`ray_targets` lists the
metrics agents of a Ray cluster. The page needs ``prometheus_client``, imported when it is
served: importing this module takes only the standard library."""

from __future__ import annotations

import atexit
import ipaddress
import os
import socket
import sys
import threading
import time
import urllib.parse
import warnings
from typing import List, Optional

from ._common import VllmstatError, _base_url, _url_host
from ._api import Client
from ._http import _Handler, _Server, _Server6
from .page import _Page

__all__ = ["expose", "ray_targets"]

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
        """The answer to one request: the page, or prometheus_client's answer (the body a list
        of bytes)."""
        began = time.monotonic()
        path, _, query = target.partition("?")
        out = self._page.respond(method, urllib.parse.unquote(path, "iso-8859-1"), query, headers.get("accept"),
                                headers.get("accept-encoding"), headers.get("x-vllmstat-layout"))
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

