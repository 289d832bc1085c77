"""The sidecar: :func:`start` runs ``vllmstat run`` as a child process of the trainer and
returns a :class:`Sidecar`, a :class:`~vllmstat.client.Client` for it that also stops it."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import IO, Any, Callable, Deque, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from . import _settings
from ._common import _HERE, VllmstatError, _redact, _warn
from ._api import Client, _compare_version

__all__ = ["Sidecar", "binary_path", "start"]

# start() runs `vllmstat run` as a child process of the trainer: its settings go into a config
# file of its own (JSON, which vllmstat reads as YAML), or, beside a config file the trainer
# names, into the flags that set them, but for the targets, which go into a targets file: a
# target's URL may hold a password, and a command line is there for every user to read. The
# API's address, which the trainer may leave to the system (port 0), is read from the run's
# "api listening url=..." line, and exported as VLLMSTAT_URL while the sidecar runs.

# How many of the sidecar's last output lines are kept for error messages.
_TAIL_LINES = 40
_API_LINE = re.compile(r'api listening"? url=(\S+)')

_sidecars_lock = threading.Lock()
_sidecars: set = set()  # sidecars not closed yet: closed at interpreter exit
_sidecars_at_exit = False
# What start() exports for other processes to find the sidecar, and the values it found there
# before the first sidecar; the sidecars that export, in start order (the last one's is set).
_EXPORTED = ("VLLMSTAT_URL", "VLLMSTAT_API_TOKEN")
_env_before: Dict[str, Optional[str]] = {}
_exporting: List[Sidecar] = []


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

    With an ``out_dir``, the process's output also goes to ``OUT_DIR/sidecar.log`` (added to,
    run after run), written by the process itself: what it says when it stops is kept there
    even when the trainer was killed first. The warning's first line is added when it dies.

    Attributes:
        url: the API's base URL, with the port the system chose for ``listen`` port 0; also
            ``VLLMSTAT_URL`` in the environment while the sidecar runs (see :func:`start`).
        process: the ``subprocess.Popen`` of the binary.
        out_dir: the run's output directory when ``start()`` was given it, else ``None``.
    """

    def __init__(self, url: str, process: subprocess.Popen, output: _Output, out_dir: Optional[str] = None,
                 token: Optional[str] = None, timeout: float = 60.0, strict: bool = False,
                 cleanup: Optional[str] = None, log: Optional[str] = None) -> None:
        super().__init__(url, token=token, timeout=timeout, strict=strict)
        self._export_token: Optional[str] = None  # the token start() was given, for other processes
        self.process = process
        self.out_dir = out_dir
        self._output = output
        self._log = log  # OUT_DIR/sidecar.log, when the process's output goes there
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
                    _warn("vllmstat: the sidecar (pid %d) did not stop within %gs of SIGTERM; killing it"
                          % (self.process.pid, timeout), stacklevel=2)
                    self.process.kill()
                    self.process.wait()
            self._output.join(10.0)
        finally:
            if self._cleanup:
                shutil.rmtree(self._cleanup, ignore_errors=True)
                self._cleanup = None
            with _sidecars_lock:
                _sidecars.discard(self)
                _unexport(self)
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
        if self._log:
            try:
                with open(self._log, "a", encoding="utf-8") as f:
                    f.write("vllmstat: the sidecar (pid %d) exited with code %s\n" % (self.process.pid,
                                                                                    self.process.poll()))
            except OSError:
                pass  # the warning below says it all the same
        _warn("vllmstat: the sidecar " + self._exit_story(), stacklevel=2)


class _Output:
    """Follows a child's log file on a thread: keeps its last lines, finds the API's URL, copies
    the lines on, and tells when the process has ended.

    The child writes to a file, not a pipe: it never waits for this process to read (a trainer
    busy in a long call must not stall the scrapes), and it can still log its shutdown when
    this process is gone (a write to a pipe whose reader died would end it with SIGPIPE).
    """

    _POLL = 0.05  # seconds between looks at the file while it has nothing new

    def __init__(self, path: str, process: subprocess.Popen, echo: Union[bool, IO[str]], offset: int = 0) -> None:
        self.tail: Deque[str] = deque(maxlen=_TAIL_LINES)
        self.url: Optional[str] = None
        self.changed = threading.Condition()
        self.ended = False  # the process has ended and its output was read to the end
        self._path = path
        self._offset = offset  # where this process's output starts in the file
        self._process = process
        self._echo = echo
        self._on_end: Optional[Callable[[], None]] = None
        self._thread = threading.Thread(target=self._follow, name="vllmstat-sidecar-output", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                part = b""
                last_look = False
                while True:
                    got = f.readline()
                    if got.endswith(b"\n"):
                        self._line((part + got).decode("utf-8", "replace"))
                        part = b""
                    elif got:
                        part += got  # the rest of the line is not written yet
                    elif last_look:
                        if part:
                            self._line((part + b"\n").decode("utf-8", "replace"))
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
        line = _redact(line)  # vllmstat hides a target's password itself; nor is it shown here
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


def start(config: Union[str, os.PathLike, Mapping[str, Any], None] = None, *, binary: Optional[str] = None,
          echo: Union[bool, IO[str]] = True, start_timeout: float = 60.0, timeout: float = 60.0,
          strict: bool = False, **settings: Any) -> Sidecar:
    """Starts vllmstat as a sidecar of this process and returns a :class:`Sidecar` for it.

    Runs ``vllmstat run`` with the given configuration, waits until its API answers
    ``/healthz``, and returns an object that is also a :class:`Client` for it; the process is
    stopped (SIGTERM) by :meth:`Sidecar.close`, at the end of a ``with`` block, or at
    interpreter exit. On Linux it is also stopped if this process dies without exiting
    (SIGKILL) when started from the main thread.

    While it runs, ``VLLMSTAT_URL`` in ``os.environ`` is its address (and ``VLLMSTAT_API_TOKEN``
    the ``api_token`` given here, if any): ``Client()`` and :func:`expose` find it with no
    arguments, in this process and in the ones it starts afterwards (Ray workers of a local
    ``ray.init()`` called later, subprocesses). Closing it puts the variables back.

    The settings reach the process in files only this user can read (targets beside a config
    file in a targets file), never on its command line, so a target URL's password is not
    shown by ``ps``; nor is it shown in any message.

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
            ``vllm_metrics_log_scalars``, ``record``, ``worker_labels``, ``sinks`` by name,
            ``resume_from``). ``resume_from`` is a whole number or a string of decimal digits
            (``"010"`` is step 10; other bases are refused).
        binary: the vllmstat binary to run; default :func:`binary_path`.
        echo: where the process's output lines (its step summaries and log) are copied:
            ``True`` for this process's stderr, ``False`` for nowhere, or a text stream. The
            last 40 are kept either way for error messages (:meth:`Sidecar.output`), and with
            an ``out_dir`` all of them are in ``OUT_DIR/sidecar.log`` too.
        start_timeout: seconds to wait for the API to answer.
        timeout, strict: as for :class:`Client`.

    Raises :class:`VllmstatError` (with the process's last lines) when it exits or does not
    answer within ``start_timeout``; when vllmstat refused a setting, the error names it as
    given here (``start() got an unknown setting step_evry; did you mean step_every?``).
    ``FileNotFoundError`` when there is no binary, and ``TypeError``/``ValueError`` for
    settings it cannot pass.
    """
    exe = binary or binary_path()
    # A private directory for the run's log and the files written here (0700: they may hold
    # credentials), removed when the sidecar is closed.
    cleanup = tempfile.mkdtemp(prefix="vllmstat-sidecar-")
    try:
        run_plan = _settings.plan(config, settings, cleanup)
    except BaseException:
        shutil.rmtree(cleanup, ignore_errors=True)
        raise
    args, out_dir, token = [exe, "run"] + run_plan.args, run_plan.out_dir, run_plan.token
    env = dict(os.environ)
    if token:
        env["VLLMSTAT_API_TOKEN"] = token
    deadline = time.monotonic() + start_timeout
    try:
        log, logf, offset = _open_log(out_dir, cleanup)
        with logf:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                    preexec_fn=_parent_death_signal())
    except BaseException:
        shutil.rmtree(cleanup, ignore_errors=True)
        raise
    output = _Output(log, proc, echo, offset)

    def fail(why: str) -> VllmstatError:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        output.join(5.0)
        shutil.rmtree(cleanup, ignore_errors=True)
        told, others = _settings.explain(run_plan, list(output.tail))
        if told:  # vllmstat refused a setting: told as start()'s, not as the files written here
            return VllmstatError("%s\nvllmstat run %s%s" % ("\n".join(told), why, "; its other last lines:\n" +
                                                                _indent(others) if others else ""))
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
    # The run has read its config and targets (it read them before its API answered, and never
    # again): they may hold credentials, so they go now rather than when the sidecar is closed,
    # which a trainer killed with SIGKILL never does.
    for path in run_plan.written:
        with contextlib.suppress(OSError):
            os.remove(path)
    sidecar = Sidecar(url, proc, output, out_dir=out_dir, token=token or env.get("VLLMSTAT_API_TOKEN"),
                      timeout=timeout, strict=strict, cleanup=cleanup,
                      log=None if log.startswith(cleanup + os.sep) else log)
    sidecar._version_checked = True
    sidecar._export_token = token
    if isinstance(health, dict):
        _compare_version(url, health, stacklevel=2)
    global _sidecars_at_exit
    with _sidecars_lock:
        _sidecars.add(sidecar)
        _export(sidecar)
        if not _sidecars_at_exit:
            atexit.register(_close_sidecars)
            _sidecars_at_exit = True
    return sidecar


def _open_log(out_dir: Optional[str], cleanup: str) -> Tuple[str, IO[bytes], int]:
    """The file the process's output goes to, open for appending, and where this run's output
    starts in it: OUT_DIR/sidecar.log, else (no out_dir, or one that cannot be made, which the
    process then reports itself) a file in the private directory."""
    if out_dir:
        path = os.path.abspath(os.path.join(os.fspath(out_dir), "sidecar.log"))
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            f = open(path, "ab")
            return path, f, f.seek(0, os.SEEK_END)
        except OSError:
            pass
    path = os.path.join(cleanup, "vllmstat.log")
    return path, open(path, "wb"), 0


def _export(s: Sidecar) -> None:
    """Sets VLLMSTAT_URL to the sidecar's address, and VLLMSTAT_API_TOKEN to the token start()
    was given, for the processes started from now on (Ray workers, say) to find it with
    Client() and expose(). Called with _sidecars_lock held."""
    if not _exporting:
        _env_before.clear()
        _env_before.update({k: os.environ.get(k) for k in _EXPORTED})
    _exporting.append(s)
    _set_env(s)


def _set_env(s: Sidecar) -> None:
    _setenv("VLLMSTAT_URL", s.url)
    _setenv("VLLMSTAT_API_TOKEN", s._export_token or _env_before.get("VLLMSTAT_API_TOKEN"))


def _setenv(name: str, value: Optional[str]) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _unexport(s: Sidecar) -> None:
    """A closed sidecar's address is no longer exported: the one started before it that still
    runs is, else what was there before. A VLLMSTAT_URL set by others since is left alone.
    Called with _sidecars_lock held."""
    if s not in _exporting:
        return
    was_set = _exporting[-1] is s
    _exporting.remove(s)
    if not was_set or os.environ.get("VLLMSTAT_URL") != s.url:
        return
    if _exporting:
        _set_env(_exporting[-1])
    else:
        for name, value in _env_before.items():
            _setenv(name, value)


def _close_sidecars() -> None:
    with _sidecars_lock:
        running = list(_sidecars)
    for s in running:
        try:
            s.close()
        except Exception:  # at exit, nothing to report to
            pass
