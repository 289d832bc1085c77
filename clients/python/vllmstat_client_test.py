"""Tests of vllmstat_client against a real `vllmstat run` scraping a real `vllmstat sim`.

The vllmstat binary comes from VLLMSTAT_BIN, or is built with `go build` from this repository.
Run: python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import gzip
import http.server
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllmstat_client  # noqa: E402
from vllmstat_client import Client, VllmstatError, log_to, scalars  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def vllmstat_bin(tmp):
    b = os.environ.get("VLLMSTAT_BIN")
    if b:
        return b
    out = os.path.join(tmp, "vllmstat")
    subprocess.run(["go", "build", "-o", out, "./cmd/vllmstat"], cwd=REPO, check=True)
    return out


class LineReader:
    """Reads a subprocess's stream on a thread, so that every wait for a line has a deadline
    (a hung process fails the test with what it printed instead of hanging it), and the pipe
    never fills up."""

    def __init__(self, stream):
        self.stream = stream
        self.lines = queue.Queue()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        for line in iter(self.stream.readline, ""):
            self.lines.put(line)
        self.lines.put(None)  # end of stream

    def close(self, timeout=10):
        """Closes the stream once the process has exited and the thread has read it to the end."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("the process's output did not end within %ss of its exit" % timeout)
        self.stream.close()


def read_until(reader, pattern, timeout=30):
    """Reads lines from reader until one matches pattern, for at most timeout seconds."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        left = deadline - time.monotonic()
        try:
            line = reader.lines.get(timeout=max(left, 0))
        except queue.Empty:
            raise AssertionError("no line matching %r within %ss; the process printed:\n%s"
                                 % (pattern, timeout, "".join(seen)))
        if line is None:
            raise AssertionError("the process's output ended before a line matching %r:\n%s"
                                 % (pattern, "".join(seen)))
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m, seen


class Unreachable:
    """A loopback port that refuses connections while the object lives: bound but not
    listening, so no other process can take it in the meantime."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()


class FakeAPI:
    """A stand-in for vllmstat's API on loopback: answers each path as the test says and keeps
    every request it got as (method, path, JSON body).

    pause() makes it take requests and answer none until resume(), as a vllmstat stopped by
    SIGSTOP does (the kernel still completes the connections); an answer of a path in ``ready``
    waits until that condition on the requests so far holds.
    """

    def __init__(self):
        self.answers = {}  # path -> (status, body); body bytes are sent as they are
        self.requests = []
        self.ready = {}  # path -> condition on self.requests that its answer waits for
        self.changed = threading.Condition()
        self.answering = threading.Event()
        self.answering.set()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                with api.changed:
                    api.requests.append((self.command, self.path, body))
                    api.changed.notify_all()
                    cond = api.ready.get(self.path)
                    if cond is not None:
                        api.changed.wait_for(cond, 30)
                api.answering.wait()
                try:
                    self._answer()
                except OSError:
                    pass  # the client gave up waiting and went away

            def _answer(self):
                status, out = api.answers.get(self.path, (404, {"error": "no such endpoint"}))
                if out == "not http":
                    self.wfile.write(b"garbage\r\n\r\n")
                    return
                raw = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def pause(self):
        self.answering.clear()

    def resume(self):
        self.answering.set()

    def paths(self):
        with self.changed:
            return [p for _, p, _ in self.requests]

    def wait_paths(self, n, timeout=30):
        """Waits until n requests came in and returns their paths."""
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError("%d requests within %ss, not %d: %s" % (len(self.requests), timeout, n,
                                                                             self.requests))
            return [p for _, p, _ in self.requests]

    def edges(self):
        """The phase calls received, as ("start"|"end", name)."""
        return [(p.rsplit("/", 1)[1], b["phase"]) for m, p, b in self.requests if p.startswith("/v1/phases/")]

    def close(self):
        self.answering.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def edge(phase, kind, **kw):
    return dict({"phase": phase, "edge": kind, "ts": "2026-01-01T00:00:00Z"}, **kw)


class Fleet:
    """A `vllmstat sim` fleet and a `vllmstat run` sidecar with its API."""

    def __init__(self, tmp, token=None, sim_args=()):
        self.tmp = tmp
        self.sim_args = list(sim_args)
        self.bin = vllmstat_bin(tmp)
        self.run = self.sim = None
        try:
            self._start(token)
        except BaseException:
            for p in (self.run, self.sim):  # no process outlives a failed start
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
            raise

    def _start(self, token):
        tmp = self.tmp
        self.sim = subprocess.Popen(
            [self.bin, "sim", "--servers", "2", "--dp", "2", "--port", "0", "--speed", "4", "--seed", "3"] + self.sim_args,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.sim_out = LineReader(self.sim.stdout)
        urls = []
        while len(urls) < 2:
            m, _ = read_until(self.sim_out, r"(http://\S+/metrics)")
            urls.append(m.group(1))
        self.urls = urls
        self.out = os.path.join(tmp, "out")
        self.rec = os.path.join(tmp, "rec.jsonl.gz")
        env = dict(os.environ)
        if token:
            env["VLLMSTAT_API_TOKEN"] = token
        # port 0: the run binds a free port itself and logs its URL
        args = [self.bin, "run", "--listen", "127.0.0.1:0", "--step-every", "0",
                "--interval", "0.2", "--out", self.out, "--record", self.rec, "--per-worker"]
        for u in urls:
            args += ["--target", u]
        self.run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.run_err = LineReader(self.run.stderr)
        m, _ = read_until(self.run_err, r"api listening.* url=(http://\S+)")
        self.url = m.group(1)

    def stop(self):
        # the sidecar first: on SIGINT it scrapes the fleet once more to close the open step
        codes = []
        for p in (self.run, self.sim):
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(2)
            try:
                codes.append(p.wait(timeout=30))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError("%s did not stop within 30s of SIGINT" % p.args[1])
        for r in (getattr(self, "run_err", None), self.sim_out):
            if r:
                r.close()
        return codes

    def steps_jsonl(self):
        with open(os.path.join(self.out, "steps.jsonl")) as f:
            return [json.loads(l) for l in f if l.strip()]


class ClientAgainstRealRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.fleet = Fleet(cls.tmp)
        cls.client = Client(cls.fleet.url, strict=True, timeout=30)

    @classmethod
    def tearDownClass(cls):
        if cls.fleet.run.poll() is None or cls.fleet.sim.poll() is None:
            cls.fleet.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_steps_equal_jsonl_and_conserve_counters(self):
        c = self.client
        self.assertTrue(c.health())
        got = []
        for n in (1, 2, 5):  # step numbers may skip
            time.sleep(1.5)
            rec = c.end_step(n)
            self.assertEqual(rec["step"], n)
            self.assertIn("vllm/generation_tokens", rec["metrics"])
            got.append(rec)
        with self.assertRaises(VllmstatError) as cm:
            c.end_step(5)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(c.step(2), got[1])
        self.assertEqual([r["step"] for r in c.steps(since=2)], [2, 5])
        live = c.live()
        self.assertEqual(len(live["targets"]), 2)
        self.assertTrue(all(t["up"] for t in live["targets"]))

        self.assertEqual(self.fleet.stop(), [0, 0])
        lines = self.fleet.steps_jsonl()
        # what end_step returned is exactly what was written; the step open at SIGINT, which
        # the trainer never ended, is no step: it is written apart
        self.assertEqual(lines, got)
        with open(os.path.join(self.fleet.out, "open-step.json")) as f:
            open_step = json.load(f)

        # conservation: summed over steps, generation tokens equal the increase between the
        # first and the last page the run saw of each engine (no restarts in this fleet)
        first, last = {}, {}
        with gzip.open(self.fleet.rec, "rt") as f:
            for line in f:
                e = json.loads(line)
                if e["kind"] != "scrape" or "body" not in e:
                    continue
                for m in re.finditer(r'^vllm:generation_tokens_total\{engine="(\d+)"[^}]*\} (\S+)$', e["body"], re.M):
                    key = (e["target"], m.group(1))
                    first.setdefault(key, float(m.group(2)))
                    last[key] = float(m.group(2))
        truth = sum(last[k] - first[k] for k in last)
        self.assertGreater(truth, 0)
        self.assertEqual(sum(l["metrics"].get("vllm/generation_tokens", 0) for l in lines + [open_step]), truth)


# The counters of a step record; a phase's count of each is part of the step's.
COUNTER_KEYS = ["vllm/" + n for n in ("prompt_tokens", "generation_tokens", "prefix_cache_queries",
                                      "prefix_cache_hits", "num_preemptions")]


class PhasesAgainstRealRun(unittest.TestCase):
    """Two steps with a rollout phase in each, against a real `vllmstat run` and `vllmstat sim`."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.fleet = Fleet(self.tmp)

    def tearDown(self):
        self.fleet.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_records_carry_the_rollout_phase(self):
        c = Client(self.fleet.url, strict=True, timeout=30)
        got = []
        for n in (1, 2):
            time.sleep(0.6)  # the engines work outside the phase too
            with c.phase("rollout") as start:
                self.assertEqual((start["phase"], start["edge"]), ("rollout", "start"))
                self.assertEqual(start.get("ended", ""), "")  # no other phase was open
                time.sleep(1.2)
            time.sleep(0.6)
            got.append(c.end_step(n))
        for rec in got:
            self.assertEqual(sorted(rec.get("phases", {})), ["rollout"], rec)
            ph = rec["phases"]["rollout"]
            self.assertEqual(ph["intervals"], 1)
            self.assertGreaterEqual(ph["duration_s"], 1.2)
            self.assertLess(ph["duration_s"], rec["duration_s"])
            self.assertGreater(ph["metrics"].get("vllm/generation_tokens", 0), 0, ph)
            for k in COUNTER_KEYS:
                if k in ph["metrics"]:
                    self.assertLessEqual(ph["metrics"][k], rec["metrics"][k], "step %d %s" % (rec["step"], k))
            flat = scalars(rec)
            self.assertEqual(flat["vllm/rollout/generation_tokens"], ph["metrics"]["vllm/generation_tokens"])
            self.assertEqual(flat["vllm/generation_tokens"], rec["metrics"]["vllm/generation_tokens"])
        self.assertEqual(c.steps(since=1), got)  # read back with their phases

        # the server's refusals, as the client reports them
        with self.assertRaises(VllmstatError) as cm:
            c.end_phase("rollout")
        self.assertEqual(cm.exception.status, 409)
        with self.assertRaises(VllmstatError) as cm:
            c.start_phase("num_preemptions")  # a step key's name
        self.assertEqual(cm.exception.status, 400)


class ClientFailures(unittest.TestCase):
    def test_unreachable_returns_empty_and_warns_once(self):
        with Unreachable() as dead, warnings.catch_warnings(record=True) as w:
            c = Client(dead.url, timeout=2)
            warnings.simplefilter("always")
            self.assertEqual(c.end_step(1), {})
            self.assertEqual(c.end_step(2), {})
            self.assertEqual(c.steps(), [])
            self.assertFalse(c.health())
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        self.assertIn("cannot reach", str(w[0].message))

    def test_strict_raises(self):
        with Unreachable() as dead:
            c = Client(dead.url, timeout=2, strict=True)
            with self.assertRaises(VllmstatError):
                c.end_step(1)

    def test_bad_step_argument(self):
        with self.assertRaises(ValueError):
            Client(strict=True).end_step(-1)
        with self.assertRaises(ValueError):
            Client(strict=True).end_step("3")
        with warnings.catch_warnings(record=True) as w:  # never raises unless strict
            warnings.simplefilter("always")
            self.assertEqual(Client().end_step(-1), {})
        self.assertIn("step must be a whole number", str(w[0].message))


class StepTraceParent(unittest.TestCase):
    """end_step's traceparent: given, taken from OpenTelemetry's current span, or none."""

    TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    def setUp(self):
        self.api = FakeAPI()
        self.addCleanup(self.api.close)
        self.api.answers["/v1/steps/end"] = (200, {"step": 1, "metrics": {}})

    def sent(self):
        return [b for _, p, b in self.api.requests if p == "/v1/steps/end"]

    def test_given_or_none(self):
        c = Client(self.api.url, timeout=5, strict=True)
        c._version_checked = True
        c.end_step(1, traceparent=self.TP)
        c.end_step(2, traceparent="")
        c.end_step(3)  # no opentelemetry package on this Python: nothing extra
        self.assertNotIn("opentelemetry", sys.modules)
        self.assertEqual(self.sent(), [{"step": 1, "traceparent": self.TP}, {"step": 2}, {"step": 3}])

    def test_current_span_when_opentelemetry_is_installed(self):
        # The opentelemetry package is not in Debian: a module on the path stands in for its
        # propagate.inject, the one call the client makes, as the API documents it (it writes
        # the current context's traceparent into the carrier, nothing without a span).
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "opentelemetry"))
        open(os.path.join(d, "opentelemetry", "__init__.py"), "w").close()
        with open(os.path.join(d, "opentelemetry", "propagate.py"), "w") as f:
            f.write("CURRENT = None\n\ndef inject(carrier):\n    if CURRENT:\n        carrier['traceparent'] = CURRENT\n")
        sys.path.insert(0, d)
        self.addCleanup(sys.path.remove, d)
        self.addCleanup(lambda: [sys.modules.pop(m, None) for m in ("opentelemetry", "opentelemetry.propagate")])
        import opentelemetry.propagate as propagate
        c = Client(self.api.url, timeout=5, strict=True)
        c._version_checked = True
        c.end_step(1)
        propagate.CURRENT = self.TP
        c.end_step(2)
        c.end_step(3, traceparent="")
        self.assertEqual(self.sent(), [{"step": 1}, {"step": 2, "traceparent": self.TP}, {"step": 3}])
        self.api.answers["/v1/phases/start"] = (200, edge("rollout", "start"))
        c.start_phase("rollout")  # a phase call sends the current span too
        self.assertEqual(self.api.requests[-1], ("POST", "/v1/phases/start", {"phase": "rollout", "traceparent": self.TP}))


class PhaseCalls(unittest.TestCase):
    """start_phase, end_phase and phase() against FakeAPI: what they send, and their failures."""

    def setUp(self):
        self.api = FakeAPI()
        self.addCleanup(self.api.close)
        self.api.answers["/v1/phases/start"] = (200, edge("rollout", "start"))
        self.api.answers["/v1/phases/end"] = (200, edge("rollout", "end"))

    def client(self, strict=False):
        return Client(self.api.url, timeout=5, strict=strict)

    def test_calls_send_the_phase_and_return_the_edge(self):
        c = self.client(strict=True)
        self.assertEqual(c.start_phase("rollout"), edge("rollout", "start"))
        self.assertEqual(c.end_phase("rollout"), edge("rollout", "end"))
        self.assertEqual(self.api.requests, [("POST", "/v1/phases/start", {"phase": "rollout"}),
                                             ("POST", "/v1/phases/end", {"phase": "rollout"})])

    def test_context_manager_starts_and_ends(self):
        for strict in (False, True):
            self.api.requests.clear()
            with self.client(strict).phase("rollout") as e:
                self.assertEqual(self.api.edges(), [("start", "rollout")])
                self.assertEqual(e, edge("rollout", "start"))
            self.assertEqual(self.api.edges(), [("start", "rollout"), ("end", "rollout")])

    def test_context_manager_ends_when_the_body_raises(self):
        class Boom(Exception):
            pass

        for strict in (False, True):
            self.api.requests.clear()
            boom = Boom("body failed")
            with self.assertRaises(Boom) as cm:
                with self.client(strict).phase("rollout"):
                    raise boom
            self.assertIs(cm.exception, boom)
            self.assertIsNone(cm.exception.__context__)
            self.assertEqual(self.api.edges(), [("start", "rollout"), ("end", "rollout")])

    def test_strict_body_exception_wins_over_a_failed_end(self):
        self.api.answers["/v1/phases/end"] = (409, {"error": "phase is not open"})
        boom = KeyError("body failed")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with self.assertRaises(KeyError) as cm:
                with self.client(strict=True).phase("rollout"):
                    raise boom
        self.assertIs(cm.exception, boom)
        self.assertIsNone(cm.exception.__context__)
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        self.assertIn("HTTP 409", str(w[0].message))
        self.assertEqual(w[0].filename, __file__)
        # without the body's exception, strict raises the failed end
        with self.assertRaises(VllmstatError) as cm:
            with self.client(strict=True).phase("rollout"):
                pass
        self.assertEqual(cm.exception.status, 409)

    def test_refusal_of_the_end_in_phase_points_at_the_with(self):
        self.api.answers["/v1/phases/end"] = (409, {"error": "phase is not open"})
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with self.client().phase("rollout"):
                pass
        self.assertEqual([(x.filename, str(x.message)) for x in w],
                         [(__file__, "vllmstat: POST /v1/phases/end: HTTP 409: phase is not open")])

    def test_refusals_warn_once_per_kind_and_strict_raises_them(self):
        self.api.answers["/v1/phases/end"] = (409, {"error": "phase is not open"})
        self.api.answers["/v1/steps/end"] = (200, {"step": 1, "metrics": {}})
        c = self.client()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for step in range(3):  # the same mistake every step, with good calls between
                self.assertIsNone(c.end_phase("rollout"))
                self.assertEqual(c.end_step(step), {"step": 1, "metrics": {}})
            with c.phase("rollout") as e:  # its end is the same refusal: not warned again
                self.assertEqual(e, edge("rollout", "start"))
            self.api.answers["/v1/phases/start"] = (400, {"error": "phase name \"num_preemptions\" is the name of a step key"})
            self.assertIsNone(c.start_phase("num_preemptions"))
            self.assertIsNone(c.start_phase("num_preemptions"))
            self.assertIsNone(c.end_phase("eval"))  # another phase: another kind
        self.assertEqual([str(x.message) for x in w], [
            'vllmstat: POST /v1/phases/end: HTTP 409: phase is not open',
            'vllmstat: POST /v1/phases/start: HTTP 400: phase name "num_preemptions" is the name of a step key',
            'vllmstat: POST /v1/phases/end: HTTP 409: phase is not open',
        ])
        self.assertTrue(all(x.filename == __file__ for x in w), [x.filename for x in w])

        strict = self.client(strict=True)
        for call, name, status in ((strict.end_phase, "rollout", 409), (strict.start_phase, "num_preemptions", 400)):
            with self.assertRaises(VllmstatError) as cm:
                call(name)
            self.assertEqual(cm.exception.status, status)
        with self.assertRaises(VllmstatError):
            with strict.phase("num_preemptions"):
                self.fail("strict: the body does not run when the start fails")

    def test_bad_answers_return_none(self):
        for answer in ((500, {"error": "collector stopped"}), (200, b"not json"), (200, "not http")):
            self.api.answers["/v1/phases/start"] = answer
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                c = self.client()
                self.assertIsNone(c.start_phase("rollout"))
                self.assertIsNone(c.start_phase("rollout"))
                with self.client().phase("rollout") as e:
                    self.assertIsNone(e)
            self.assertEqual(len(w), 2, (answer, [str(x.message) for x in w]))
            self.assertEqual([x.filename for x in w], [__file__] * 2)  # the trainer's line
            with self.assertRaises(VllmstatError):
                self.client(strict=True).start_phase("rollout")

    def test_unreachable_never_raises_and_warns_once_with_end_step(self):
        with Unreachable() as dead, warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c = Client(dead.url, timeout=2)
            ran = False
            with c.phase("rollout") as e:
                ran = True
                self.assertIsNone(e)
            self.assertTrue(ran)
            self.assertIsNone(c.end_phase("rollout"))
            self.assertEqual(c.end_step(1), {})
            with self.assertRaises(VllmstatError):
                Client(dead.url, timeout=2, strict=True).start_phase("rollout")
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        self.assertIn("cannot reach", str(w[0].message))

    def test_names_are_checked_before_any_request(self):
        for good in ("a", "rollout", "eval_2", "a" * 32):
            self.assertEqual(self.client(strict=True).start_phase(good), edge("rollout", "start"))
        self.api.requests.clear()
        bad = ["", "Rollout", "roll-out", "2eval", "_eval", "a" * 33, "rollout\n", " rollout", None, 3, b"rollout"]
        strict = self.client(strict=True)
        for name in bad:
            for call in (strict.start_phase, strict.end_phase):
                with self.assertRaises(ValueError, msg=repr(name)):
                    call(name)
            with self.assertRaises(ValueError, msg=repr(name)):
                with strict.phase(name):
                    self.fail("strict: the body does not run for a bad name")
        c = self.client()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for name in bad:
                self.assertIsNone(c.start_phase(name))
                self.assertIsNone(c.end_phase(name))
                with c.phase(name) as e:
                    self.assertIsNone(e)
        self.assertEqual(self.api.requests, [])
        self.assertEqual(len(w), len(bad), [str(x.message) for x in w])  # once per name
        self.assertIn("phase name 'Rollout'", str(w[1].message))
        self.assertTrue(all(x.filename == __file__ for x in w), [x.filename for x in w])

    def test_an_answer_that_is_not_http_is_a_failure(self):
        self.api.answers["/v1/steps/end"] = (200, "not http")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(self.client().end_step(1), {})
        self.assertIn("bad answer", str(w[0].message))
        with self.assertRaises(VllmstatError):
            self.client(strict=True).end_step(1)


class FakeClock:
    """A monotonic clock that moves only when the test moves it."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class HungVllmstat(unittest.TestCase):
    """A vllmstat that takes requests and answers none (FakeAPI paused, as SIGSTOP leaves one)."""

    # Far above the bound a hung vllmstat may cost a call here (HANG): a call that waited for
    # its timeout fails the test.
    TIMEOUT = 30.0
    HANG, PROBE = 0.6, 0.2

    def setUp(self):
        self.api = FakeAPI()
        self.addCleanup(self.api.close)
        self.api.answers["/v1/steps/end"] = (200, {"step": 2, "metrics": {"vllm/a": 1}})
        self.api.answers["/v1/live"] = (200, {"step": {}, "targets": []})
        self.api.answers["/healthz"] = (200, {"status": "ok", "version": vllmstat_client.__version__})
        self.clock = FakeClock()

    def client(self, **kw):
        c = Client(self.api.url, timeout=self.TIMEOUT, hang_timeout=self.HANG, probe_timeout=self.PROBE,
                   probe_every=5.0, clock=self.clock, **kw)
        c._version_checked = True  # no version request among the ones counted here
        return c

    def timed(self, f, *args):
        began = time.monotonic()
        out = f(*args)
        return out, time.monotonic() - began

    def test_one_call_waits_then_calls_fail_at_once_until_healthz_answers(self):
        c = self.client()
        self.api.pause()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out, took = self.timed(c.end_step, 1)
            self.assertEqual(out, {})
            self.assertLess(took, self.TIMEOUT / 3, "the call waited for its timeout")
            self.assertGreaterEqual(took, self.HANG - self.PROBE)
            self.assertEqual(self.api.wait_paths(2), ["/v1/steps/end", "/healthz"])
            # not answering: no request at all until probe_every has passed on the client's clock
            self.assertEqual(c.end_step(2), {})
            self.assertIsNone(c.start_phase("rollout"))
            self.assertEqual(c.live(), {})
            self.assertFalse(c.health())
            self.clock.now += 4.9
            self.assertEqual(c.end_step(2), {})
            self.clock.now += 0.1
            self.assertEqual(c.end_step(2), {})  # asks /healthz, which does not answer; no step end
            self.assertEqual(self.api.wait_paths(3)[2:], ["/healthz"])
            self.clock.now += 4.9
            self.assertEqual(c.end_step(2), {})  # five seconds from that probe, not from the call before
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        self.assertRegex(str(w[0].message), r"POST /v1/steps/end: no answer from .* within 0\.4s, nor to /healthz "
                                            r"\(.*timed out.*\): it looks stopped or hung")
        self.api.resume()
        self.clock.now += 0.1
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(c.end_step(2), {"step": 2, "metrics": {"vllm/a": 1}})
            self.assertEqual(c.live(), {"step": {}, "targets": []})
        self.assertEqual(w, [])
        # what it took: the step end given up on and three probes (answered on resume, too late), then the two calls
        self.assertEqual(self.api.wait_paths(6), ["/v1/steps/end", "/healthz", "/healthz", "/healthz",
                                                   "/v1/steps/end", "/v1/live"])

    def test_strict_raises_at_once_while_it_does_not_answer(self):
        c = self.client(strict=True)
        self.api.pause()
        with self.assertRaisesRegex(VllmstatError, "no answer .* it looks stopped or hung") as e:
            self.timed(c.end_step, 1)
        self.assertIsNone(e.exception.status)
        self.assertEqual(self.api.wait_paths(2), ["/v1/steps/end", "/healthz"])
        for call in (lambda: c.end_step(2), lambda: c.start_phase("rollout"), c.live):
            with self.assertRaisesRegex(VllmstatError, r"not sent: vllmstat does not answer \(.*it looks stopped "
                                                       r"or hung\); calls fail at once until it answers /healthz"):
                call()
        with self.assertRaises(VllmstatError), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with c.phase("rollout"):
                pass
        self.assertEqual(len(w), 0)
        self.api.resume()
        self.clock.now += 5.0
        self.assertEqual(c.end_step(2)["step"], 2)
        self.assertEqual(self.api.wait_paths(4)[2:], ["/healthz", "/v1/steps/end"])

    def test_a_timeout_of_its_own_is_the_bound(self):
        # a timeout no longer than hang_timeout: the call's own bound, then the same fast failures
        c = Client(self.api.url, timeout=self.PROBE, hang_timeout=self.HANG, probe_timeout=self.PROBE / 2,
                   probe_every=5.0, clock=self.clock, strict=True)
        self.api.pause()
        with self.assertRaisesRegex(VllmstatError, r"POST /v1/steps/end: no answer from .*: timed out after 0\.2s"):
            c.end_step(1)
        with self.assertRaisesRegex(VllmstatError, "not sent"):
            c.end_step(2)
        self.assertEqual(self.api.wait_paths(1), ["/v1/steps/end"])

    def test_a_slow_answer_is_waited_for_while_healthz_answers(self):
        # a step end slower than hang_timeout (a boundary scrape of a slow engine): its answer
        # comes only once the client has asked /healthz twice, and the client takes it
        self.api.ready["/v1/steps/end"] = lambda: self.api.paths().count("/healthz") >= 2
        c = self.client(strict=True)
        self.assertEqual(c.end_step(2), {"step": 2, "metrics": {"vllm/a": 1}})
        self.assertEqual(self.api.paths(), ["/v1/steps/end", "/healthz", "/healthz"])
        self.assertEqual(c.live(), {"step": {}, "targets": []})

    def test_probe_timeout_below_hang_timeout(self):
        with self.assertRaises(ValueError):
            Client(self.api.url, hang_timeout=1.0, probe_timeout=1.0)


class TokenAndTargets(unittest.TestCase):
    def test_token_and_set_targets(self):
        tmp = tempfile.mkdtemp()
        fleet = Fleet(tmp, token="s3cret")
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                self.assertEqual(Client(fleet.url, token="wrong").end_step(1), {})
            self.assertIn("HTTP 401", str(w[0].message))
            c = Client(fleet.url, token="s3cret", strict=True)
            deadline = time.time() + 20
            while not all(t["scrapes"] > 0 for t in c.live()["targets"]) and time.time() < deadline:
                time.sleep(0.1)
            self.assertEqual(c.set_targets(fleet.urls[:1]), fleet.urls[:1])
            self.assertEqual(c.targets(), fleet.urls[:1])
            with self.assertRaises(VllmstatError) as cm:
                c.set_targets(["ftp://x/metrics"])
            self.assertEqual(cm.exception.status, 400)
            time.sleep(1)
            rec = c.end_step(1)
            self.assertEqual(rec["workers"], 4)  # the removed target's data stays in the step
            time.sleep(1)
            rec = c.end_step(2)
            self.assertEqual(rec["workers"], 2)
        finally:
            fleet.stop()
            shutil.rmtree(tmp, ignore_errors=True)


class ReadUntil(unittest.TestCase):
    def test_a_silent_process_fails_the_wait_instead_of_hanging_it(self):
        p = subprocess.Popen([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
        r = LineReader(p.stdout)
        try:
            # the line is in before the short wait starts: a slow interpreter start is no failure
            deadline = time.monotonic() + 30
            while r.lines.empty() and time.monotonic() < deadline:
                time.sleep(0.01)
            start = time.monotonic()
            with self.assertRaises(AssertionError) as cm:
                read_until(r, r"never printed", timeout=0.5)
            self.assertLess(time.monotonic() - start, 10)
            self.assertIn("started", str(cm.exception))
        finally:
            p.kill()
            p.wait()
            r.close()

    def test_an_exited_process_ends_the_wait(self):
        p = subprocess.Popen([sys.executable, "-c", "print('bye')"], stdout=subprocess.PIPE, text=True)
        r = LineReader(p.stdout)
        with self.assertRaises(AssertionError) as cm:
            read_until(r, r"never printed", timeout=30)
        self.assertIn("ended", str(cm.exception))
        p.wait()
        r.close()


class LogTo(unittest.TestCase):
    def test_logs_metrics_at_step(self):
        class Run:
            def __init__(self):
                self.calls = []

            def log(self, d, step=None):
                self.calls.append((d, step))

        run = Run()
        log_to(run, {"step": 7, "metrics": {"vllm/a": 1.5}, "plots": ["plots/step_000007/kv.png"]}, images=True, out_dir="/o")
        self.assertEqual(run.calls, [({"vllm/a": 1.5, "plots/kv": "/o/plots/step_000007/kv.png"}, 7)])
        log_to(run, {})
        self.assertEqual(len(run.calls), 1)
        log_to(run, {"step": 8, "metrics": {"vllm/a": 2}, "phases": {"rollout": {"metrics": {"vllm/a": 1}}}})
        self.assertEqual(run.calls[1], ({"vllm/a": 2, "vllm/rollout/a": 1}, 8))


class Scalars(unittest.TestCase):
    def test_phases_after_the_metric_prefix(self):
        rec = {"step": 3, "metrics": {"vllm/prefix_cache_hit_rate": 0.5, "vllm/num_preemptions": 2},
               "phases": {
                   "rollout": {"duration_s": 4.0, "intervals": 1,
                               "metrics": {"vllm/prefix_cache_hit_rate": 0.75, "vllm/time_to_first_token_seconds/p95": 0.2}},
                   "eval": {"duration_s": 1.0, "intervals": 2, "metrics": {"vllm/num_preemptions": 1, "bare": 7}},
               }}
        self.assertEqual(scalars(rec), {
            "vllm/prefix_cache_hit_rate": 0.5, "vllm/num_preemptions": 2,
            "vllm/rollout/prefix_cache_hit_rate": 0.75, "vllm/rollout/time_to_first_token_seconds/p95": 0.2,
            "vllm/eval/num_preemptions": 1, "eval/bare": 7,
        })
        self.assertEqual(scalars(rec, prefix="infer/")["infer/vllm/rollout/prefix_cache_hit_rate"], 0.75)
        self.assertEqual(scalars({"step": 1, "metrics": {"vllm/a": 1}}), {"vllm/a": 1})
        self.assertEqual(scalars({}), {})
        self.assertEqual(scalars(None), {})


if __name__ == "__main__":
    unittest.main()
