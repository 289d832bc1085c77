"""Tests of expose(), ray_targets() and Client.add_targets/remove_targets.

End to end: a real `vllmstat run` with no targets, and real Python processes that define vLLM's
metric families in their default prometheus_client registry (as vLLM names them), call
expose() and count under the test's control. The test ends steps (and starts and ends phases)
through the Client and checks every step's totals, per worker, and every phase's against what the
processes counted in that step or phase. The processes also fork (os.fork, and multiprocessing's
fork context) after expose() and during its registration call, and meet a stand-in vllmstat that
answers registration late or never.

The processes need prometheus_client: they run with the first of $VLLMSTAT_TEST_PYTHON, this
Python and /usr/bin/python3 (Debian's python3-prometheus-client) that has it. Tests that serve
pages inside this process need it here too; locally they skip with a message when it is
missing, with CI=true they fail.

Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import gzip
import http.server
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
import urllib.request
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllmstat_client  # noqa: E402
from vllmstat_client import Client, VllmstatError, ray_targets  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CI = os.environ.get("CI") == "true"
WAIT = 30.0  # deadline of every wait; a healthy run takes a fraction of it

try:
    import prometheus_client  # noqa: F401
    HAVE_PROM = True
except ImportError:
    HAVE_PROM = False


def _child_python():
    for py in (os.environ.get("VLLMSTAT_TEST_PYTHON"), sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", "import prometheus_client"], capture_output=True).returncode == 0:
            return py
    return None


CHILD_PY = _child_python()


def need(ok, what):
    """Skips (locally) or fails (CI=true) when a prerequisite is missing."""
    if ok:
        return
    msg = "SKIPPED LOUDLY: %s" % what
    if CI:
        raise AssertionError(msg + " (CI=true: failing instead of skipping)")
    sys.stderr.write("\n*** %s ***\n" % msg)
    raise unittest.SkipTest(msg)


_BIN = None


def vllmstat_bin():
    global _BIN
    if _BIN is None:
        _BIN = os.environ.get("VLLMSTAT_BIN")
        if not _BIN:
            _BIN = os.path.join(tempfile.mkdtemp(), "vllmstat")
            subprocess.run(["go", "build", "-o", _BIN, "./cmd/vllmstat"], cwd=REPO, check=True)
    return _BIN


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(cond, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))


class Lines:
    """Reads a stream in a thread, so that every wait on it has a deadline."""

    def __init__(self, stream):
        self.q = queue.Queue()
        self.all = []
        self._t = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._t.start()

    def _read(self, stream):
        for line in stream:
            self.all.append(line)
            self.q.put(line)
        self.q.put(None)

    def expect(self, pattern, timeout=WAIT):
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError("no line matching %r within %.0fs; got:\n%s" % (pattern, timeout, "".join(seen)))

    def text(self, eof=False):
        """What was read so far; with eof, waits (bounded) for the stream's end first."""
        if eof:
            self._t.join(WAIT)
        return "".join(self.all)


class Vllmstat:
    """A `vllmstat run` with no targets, its API on the given address."""

    def __init__(self, tmp, listen="127.0.0.1:0", token=None):
        env = dict(os.environ)
        env.pop("VLLMSTAT_API_TOKEN", None)
        if token:
            env["VLLMSTAT_API_TOKEN"] = token
        self.out = os.path.join(tmp, "out-%d" % free_port())
        # a scrape timeout far above the interval: a boundary scrape must not fail because a
        # busy machine answered late, or its counts would move to the next step
        self.proc = subprocess.Popen(
            [vllmstat_bin(), "run", "--listen", listen, "--step-every", "0", "--interval", "0.05",
             "--scrape-timeout", "5s", "--per-worker", "--out", self.out],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.log = Lines(self.proc.stderr)
        self.url = self.log.expect(r"api listening\"? url=(\S+)").group(1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


# A process holding "an engine": vLLM's families, as vLLM registers them, in the default
# registry (or the multiprocess directory), counted on the test's commands.
CHILD = r'''
import os, signal, sys, threading, time
from prometheus_client import Counter, Gauge, Histogram
import vllmstat_client

FORK_WAIT = 20.0  # how long a forked child may take; below the test's own deadline of 30 s

LABELS = ["model_name", "engine"]
lv = {"model_name": os.environ.get("CHILD_MODEL", "test-model"), "engine": os.environ.get("CHILD_ENGINE", "0")}
mp = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

def gauge(name, doc):
    if not mp:
        return Gauge(name, doc, labelnames=LABELS)
    try:
        return Gauge(name, doc, labelnames=LABELS, multiprocess_mode="mostrecent")  # what vLLM uses
    except ValueError:  # prometheus_client before 0.17
        return Gauge(name, doc, labelnames=LABELS, multiprocess_mode="max")

m = {}
for name, doc in [("prompt_tokens", "Number of prefill tokens processed."),
                  ("generation_tokens", "Number of generation tokens processed."),
                  ("prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."),
                  ("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."),
                  ("num_preemptions", "Cumulative number of preemption from the engine.")]:
    m[name] = Counter("vllm:" + name, doc, labelnames=LABELS).labels(**lv)
for name, doc in [("num_requests_running", "Number of requests in model execution batches."),
                  ("num_requests_waiting", "Number of requests waiting to be processed."),
                  ("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")]:
    m[name] = gauge("vllm:" + name, doc).labels(**lv)
m["time_to_first_token_seconds"] = Histogram(
    "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labelnames=LABELS,
    buckets=[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
             20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]).labels(**lv)

def fork(action, arg):
    """Forks with os.fork; the child does action and exits with sys.exit (atexit runs). Prints
    "forked STATUS SECONDS REPORT": the child's exit code ("hung" if it had not exited within
    FORK_WAIT, then it is killed) and what it wrote to its pipe."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if action == "expose":
            # a page of its own; whether vllmstat has it while the child lives
            url = vllmstat_client.expose(arg)
            client = vllmstat_client.Client(arg, strict=True, timeout=FORK_WAIT)
            deadline = time.monotonic() + FORK_WAIT
            while url not in client.targets() and time.monotonic() < deadline:
                time.sleep(0.02)
            there = url in client.targets()
            os.write(w, ("%s %s" % (url, there)).encode())
        os.close(w)
        sys.exit(0)
    os.close(w)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() - t0 > FORK_WAIT:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = "hung"
            break
        time.sleep(0.01)
    secs = time.monotonic() - t0
    report = b""
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        report += b
    os.close(r)
    print("forked", status, "%.3f" % secs, report.decode(), flush=True)

def mp_worker(vllmstat, conn):
    """A multiprocessing child (fork context): counts on its own, serves its own page, waits."""
    m["generation_tokens"].inc(1000)
    conn.send(vllmstat_client.expose(vllmstat))
    conn.poll(FORK_WAIT)  # until told to go; then it returns, and multiprocessing ends the process

mp_child = None

print("ready", flush=True)
for line in sys.stdin:
    cmd = line.split()
    if not cmd:
        continue
    if cmd[0] == "inc":
        m[cmd[1]].inc(float(cmd[2]))
    elif cmd[0] == "set":
        m[cmd[1]].set(float(cmd[2]))
    elif cmd[0] == "observe":
        m[cmd[1]].observe(float(cmd[2]))
    elif cmd[0] == "expose":
        kw = {"host": cmd[2]} if len(cmd) > 2 else {}
        t0 = time.monotonic()
        url = vllmstat_client.expose(cmd[1], **kw)
        t1 = time.monotonic()
        again = vllmstat_client.expose(cmd[1], **kw)
        print("url", url, again, "%.3f" % (t1 - t0), "%.3f" % (time.monotonic() - t1), flush=True)
        continue
    elif cmd[0] == "expose-in-thread":  # returns at once; expose() runs on
        threading.Thread(target=vllmstat_client.expose, args=(cmd[1],), daemon=True).start()
    elif cmd[0] == "fork":
        fork(cmd[1], cmd[2] if len(cmd) > 2 else None)
        continue
    elif cmd[0] == "fork-in-expose":
        # another thread is inside expose() (holding its lock, as while it makes the page) when
        # the process forks; the child exposes a page of its own
        held, forked = threading.Event(), threading.Event()
        def hold():
            with vllmstat_client._expose_lock:
                held.set()
                forked.wait()
        t = threading.Thread(target=hold, daemon=True)
        t.start()
        held.wait()
        try:
            fork("expose", cmd[1])
        finally:
            forked.set()
            t.join()
        continue
    elif cmd[0] == "mp-start":
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        conn, child_conn = ctx.Pipe()
        mp_child = ctx.Process(target=mp_worker, args=(cmd[1], child_conn))
        mp_child.start()
        print("mp", conn.recv() if conn.poll(FORK_WAIT) else "none", flush=True)
        continue
    elif cmd[0] == "mp-exit":
        conn.send("exit")
        mp_child.join(FORK_WAIT)
        code = mp_child.exitcode
        if code is None:
            mp_child.kill()
            mp_child.join()
        print("mp-exit", "hung" if code is None else code, flush=True)
        continue
    elif cmd[0] == "exit":
        sys.exit(0)  # atexit: one more scrape, then deregistration
    print("ok", flush=True)
'''

COUNTERS = ["prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "num_preemptions"]


class Child:
    """One engine-holding process and what the test made it count in the open step."""

    def __init__(self, tmp, engine="0", env=None):
        need(CHILD_PY is not None, "no Python with prometheus_client for the engine processes")
        e = dict(os.environ)
        e.pop("VLLMSTAT_API_TOKEN", None)
        e["PYTHONPATH"] = HERE
        e["CHILD_ENGINE"] = engine
        e["PYTHONWARNINGS"] = "default"
        e.update(env or {})
        self.proc = subprocess.Popen([CHILD_PY, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=e, cwd=tmp)
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)
        self.out.expect("^ready")
        self.url = None
        self.engine = engine
        self.step = {}  # counter -> increase in the open step
        self.ttft = []  # observations in the open step
        self.kv = None

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def cmd(self, line):
        self.send(line)
        self.out.expect("^ok")

    def inc(self, name, n):
        self.cmd("inc %s %d" % (name, n))
        self.step[name] = self.step.get(name, 0) + n

    def observe(self, v):
        self.cmd("observe time_to_first_token_seconds %r" % v)
        self.ttft.append(v)

    def set_kv(self, v):
        self.cmd("set kv_cache_usage_perc %r" % v)
        self.kv = v

    def expose(self, vllmstat, host=None):
        t0 = time.monotonic()
        self.send("expose %s%s" % (vllmstat, " " + host if host else ""))
        m = self.out.expect(r"^url (\S*) (\S*) (\S+) (\S+)")
        self.url = m.group(1)
        self.expose_seconds = time.monotonic() - t0
        # how long each of the two expose() calls took, timed inside the process
        self.expose_calls = float(m.group(3)), float(m.group(4))
        return m.group(1), m.group(2)

    def fork(self, action="exit", arg=None):
        """Forks the process (os.fork); the child does action and exits through sys.exit.

        Returns (exit code or "hung", seconds, what the child reported)."""
        self.send(" ".join(["fork", action] + ([arg] if arg else [])))
        return self.forked()

    def forked(self):
        m = self.out.expect(r"^forked (\S+) (\S+) ?(.*)")
        return m.group(1), float(m.group(2)), m.group(3).strip()

    def new_step(self):
        self.step, self.ttft = {}, []

    def exit(self):
        self.send("exit")
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            self.proc.stdin.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT)
        for s in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                s.close()
            except OSError:
                pass


def scraped_ok(client, url, n=1):
    """Whether vllmstat has taken n good pages of url (the first is a worker's baseline)."""
    return good_scrapes(client, url) >= n


def good_scrapes(client, url):
    """How many good pages of url vllmstat has taken (-1: url is not a target)."""
    for t in client.live().get("targets", []):
        if t["url"] == url:
            return t["scrapes"] - t["failures"]
    return -1


class Processes(unittest.TestCase):
    """Engine-holding processes and, when a test starts one, a vllmstat; all ended at teardown."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.children = []
        self.vs = None

    def tearDown(self):
        for c in self.children:
            c.kill()
        if self.vs:
            self.vs.stop()
            self.vs.proc.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def child(self, **kw):
        c = Child(self.tmp, **kw)
        self.children.append(c)
        return c

    def check_step(self, rec, step, live):
        """rec's totals, per worker and summed, equal what the live children counted."""
        self.assertEqual(rec["step"], step)
        per = {(w["target"], w["engine"]): w["metrics"] for w in rec.get("per_worker", [])}
        self.assertEqual(sorted(per), sorted((c.url, c.engine) for c in live), rec)
        self.assertEqual(rec["workers"], len(live))
        for c in live:
            got = per[(c.url, c.engine)]
            for name in COUNTERS:
                self.assertEqual(got.get("vllm/" + name), c.step.get(name, 0), "step %d %s %s" % (step, c.url, name))
            if c.ttft:
                self.assertEqual(got["vllm/time_to_first_token_seconds/mean"], sum(c.ttft) / len(c.ttft))
            else:
                self.assertNotIn("vllm/time_to_first_token_seconds/mean", got)
            if c.kv is not None:
                self.assertEqual(got["vllm/kv_cache_usage_perc/max"], c.kv)
        for name in COUNTERS:
            self.assertEqual(rec["metrics"].get("vllm/" + name), sum(c.step.get(name, 0) for c in live), name)
        q = sum(c.step.get("prefix_cache_queries", 0) for c in live)
        if q:
            h = sum(c.step.get("prefix_cache_hits", 0) for c in live)
            self.assertAlmostEqual(rec["metrics"]["vllm/prefix_cache_hit_rate"], h / q, places=12)
        ttft = [v for c in live for v in c.ttft]
        if ttft:
            self.assertEqual(rec["metrics"]["vllm/time_to_first_token_seconds/mean"], sum(ttft) / len(ttft))
        for c in live:
            c.new_step()


class InProcessEndToEnd(Processes):
    def test_steps_count_exactly_what_engine_processes_counted(self):
        self.vs = Vllmstat(self.tmp)
        client = Client(self.vs.url, strict=True, timeout=WAIT)
        self.assertEqual(client.targets(), [])

        a, b = self.child(engine="0"), self.child(engine="1")
        for c in (a, b):
            url, again = c.expose(self.vs.url)
            self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")
            self.assertEqual(again, url)  # expose() twice: the same page
        # vllmstat was up: registration happened inside expose()
        self.assertEqual(sorted(client.targets()), sorted([a.url, b.url]))
        for c in (a, b):
            wait_for(lambda: scraped_ok(client, c.url), "a first scrape of " + c.url)

        # step 0: counts after the baselines, per worker
        a.inc("generation_tokens", 17)
        a.inc("prompt_tokens", 100)
        a.inc("prefix_cache_queries", 100)
        a.inc("prefix_cache_hits", 64)
        b.inc("generation_tokens", 5)
        b.inc("num_preemptions", 2)
        a.observe(0.25)
        a.observe(0.5)
        b.observe(0.75)
        a.set_kv(0.25)
        b.set_kv(0.5)
        self.check_step(client.end_step(0), 0, [a, b])

        # step 1: only b counts; a's worker is there with zero increases
        b.inc("generation_tokens", 40)
        b.inc("prefix_cache_queries", 32)
        b.inc("prefix_cache_hits", 16)
        a.set_kv(0.375)
        b.set_kv(0.625)
        self.check_step(client.end_step(1), 1, [a, b])

        # step 2: a counts and exits (it is scraped once more, then deregisters); d starts,
        # counts before it is exposed and joins: its engine was created after the step began,
        # so all it counted belongs to this step (what vllmstat does with _created)
        a.inc("generation_tokens", 9)
        a.inc("num_preemptions", 1)
        b.inc("prompt_tokens", 3)
        self.assertEqual(a.exit(), 0)
        self.assertNotIn(a.url, client.targets())
        d = self.child(engine="0")
        d.inc("generation_tokens", 11)
        d.inc("prefix_cache_queries", 8)
        d.observe(0.25)
        d.expose(self.vs.url)
        self.assertEqual(sorted(client.targets()), sorted([b.url, d.url]))
        wait_for(lambda: scraped_ok(client, d.url), "a first scrape of " + d.url)
        rec = client.end_step(2)
        # a's worker holds what it counted before it left; b's and d's as counted
        a_rec = [w for w in rec["per_worker"] if w["target"] == a.url]
        self.assertEqual(len(a_rec), 1)
        self.assertEqual(a_rec[0]["metrics"]["vllm/generation_tokens"], 9)
        self.assertEqual(a_rec[0]["metrics"]["vllm/num_preemptions"], 1)
        rec["per_worker"] = [w for w in rec["per_worker"] if w["target"] != a.url]
        rec["workers"] -= 1
        for k, v in a.step.items():
            rec["metrics"]["vllm/" + k] -= v
        self.check_step(rec, 2, [b, d])

        # step 3: the remaining two
        d.inc("generation_tokens", 2)
        b.inc("generation_tokens", 3)
        self.check_step(client.end_step(3), 3, [b, d])

        # the page itself: vLLM's names, served by prometheus_client with _created
        body = urllib.request.urlopen(d.url, timeout=WAIT).read().decode()
        self.assertIn('vllm:generation_tokens_total{engine="0",model_name="test-model"} 13.0', body)
        self.assertIn("vllm:generation_tokens_created", body)

        for c in (b, d):
            self.assertEqual(c.exit(), 0)
            self.assertNotIn("Warning", c.err.text(eof=True))
        self.assertEqual(client.targets(), [])

    def check_phase(self, rec, name, intervals, counted):
        """rec's phase name ran intervals times and counted exactly counted ({counter: n})."""
        ph = rec.get("phases", {}).get(name)
        self.assertIsNotNone(ph, "step %d has no phase %s: %s" % (rec["step"], name, rec.get("phases")))
        self.assertEqual(ph["intervals"], intervals, name)
        self.assertGreater(ph["duration_s"], 0)
        self.assertLessEqual(ph["duration_s"], rec["duration_s"])
        for c in COUNTERS:
            self.assertEqual(ph["metrics"].get("vllm/" + c, 0), counted.get(c, 0), "step %d phase %s %s" % (rec["step"], name, c))
        return ph

    def test_phases_count_exactly_what_was_counted_inside_them(self):
        self.vs = Vllmstat(self.tmp)
        client = Client(self.vs.url, strict=True, timeout=WAIT)
        a, b = self.child(engine="0"), self.child(engine="1")
        for c in (a, b):
            c.expose(self.vs.url)
            wait_for(lambda: scraped_ok(client, c.url), "a first scrape of " + c.url)

        # step 0: counts before, inside and after one rollout phase
        a.inc("generation_tokens", 5)
        with client.phase("rollout") as start:
            self.assertEqual((start["phase"], start["edge"], start.get("ended", "")), ("rollout", "start", ""))
            a.inc("generation_tokens", 17)
            a.inc("prefix_cache_queries", 100)
            a.inc("prefix_cache_hits", 64)
            b.inc("generation_tokens", 4)
            b.inc("num_preemptions", 1)
        b.inc("generation_tokens", 3)
        rec = client.end_step(0)
        self.check_step(rec, 0, [a, b])
        ph = self.check_phase(rec, "rollout", 1, {"generation_tokens": 21, "prefix_cache_queries": 100,
                                                  "prefix_cache_hits": 64, "num_preemptions": 1})
        self.assertAlmostEqual(ph["metrics"]["vllm/prefix_cache_hit_rate"], 0.64, places=12)
        self.assertEqual(sorted(rec["phases"]), ["rollout"])

        # step 1 ends while rollout is open: the phase goes on in step 2
        self.assertEqual(client.start_phase("rollout")["edge"], "start")
        a.inc("generation_tokens", 2)
        rec = client.end_step(1)
        self.check_step(rec, 1, [a, b])
        self.check_phase(rec, "rollout", 1, {"generation_tokens": 2})

        # step 2: rollout goes on, eval's start ends it, then rollout runs once more
        a.inc("generation_tokens", 6)
        self.assertEqual(client.start_phase("eval").get("ended"), "rollout")
        b.inc("generation_tokens", 8)
        b.inc("prompt_tokens", 30)
        self.assertEqual(client.end_phase("eval")["edge"], "end")
        a.inc("generation_tokens", 1)  # in no phase
        with client.phase("rollout"):
            b.inc("generation_tokens", 9)
        rec = client.end_step(2)
        self.check_step(rec, 2, [a, b])
        self.check_phase(rec, "rollout", 2, {"generation_tokens": 15})
        self.check_phase(rec, "eval", 1, {"generation_tokens": 8, "prompt_tokens": 30})

        # step 3 has no phase
        a.inc("generation_tokens", 4)
        rec = client.end_step(3)
        self.check_step(rec, 3, [a, b])
        self.assertNotIn("phases", rec)

        for c in (a, b):
            self.assertEqual(c.exit(), 0)

    def test_engine_started_before_vllmstat_registers_when_it_comes_up(self):
        port = free_port()
        api = "http://127.0.0.1:%d" % port
        r = self.child()
        url, _ = r.expose(api)
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")  # the page is served already
        r.err.expect("cannot reach .*retrying in the background")
        self.assertEqual(urllib.request.urlopen(url, timeout=WAIT).status, 200)

        self.vs = Vllmstat(self.tmp, listen="127.0.0.1:%d" % port)
        client = Client(self.vs.url, strict=True, timeout=WAIT)
        wait_for(lambda: client.targets() == [url], "the retry to register " + url)
        wait_for(lambda: scraped_ok(client, url), "a first scrape of " + url)
        r.inc("generation_tokens", 23)
        r.inc("num_preemptions", 4)
        self.check_step(client.end_step(0), 0, [r])

        # vllmstat restarts and has lost its targets: expose() again registers the same page
        self.assertEqual(self.vs.stop(), 0)
        self.vs.proc.stderr.close()
        self.vs = Vllmstat(self.tmp, listen="127.0.0.1:%d" % port)
        self.assertEqual(client.targets(), [])
        self.assertEqual(r.expose(api), (url, url))
        self.assertEqual(client.targets(), [url])

        self.assertEqual(r.exit(), 0)
        self.assertEqual(client.targets(), [])
        # one warning for the whole outage, not one per retry
        self.assertEqual(r.err.text(eof=True).count("vllmstat: cannot register"), 1, r.err.text())

    def test_multiprocess_directory(self):
        mp = os.path.join(self.tmp, "prom-mp")
        os.mkdir(mp)
        env = {"PROMETHEUS_MULTIPROC_DIR": mp}
        self.vs = Vllmstat(self.tmp)
        client = Client(self.vs.url, strict=True, timeout=WAIT)
        writer = self.child(env=env)
        server = self.child(env=env)
        url, _ = server.expose(self.vs.url)
        wait_for(lambda: scraped_ok(client, url, 2), "scrapes of " + url)
        writer.inc("generation_tokens", 5)
        server.inc("generation_tokens", 7)
        writer.inc("prefix_cache_queries", 10)
        server.inc("prefix_cache_hits", 4)
        rec = client.end_step(0)
        # one page, one worker: the directory summed over both processes
        self.assertEqual(rec["workers"], 1)
        self.assertEqual(rec["metrics"]["vllm/generation_tokens"], 12)
        self.assertEqual(rec["metrics"]["vllm/prefix_cache_hit_rate"], 0.4)
        body = urllib.request.urlopen(url, timeout=WAIT).read().decode()
        self.assertIn('vllm:generation_tokens_total{engine="0",model_name="test-model"} 12.0', body)
        self.assertNotIn("_created", body)  # multiprocess mode has none

        self.assertEqual(writer.exit(), 0)  # its counts stay in the directory
        server.inc("generation_tokens", 3)
        rec = client.end_step(1)
        self.assertEqual(rec["metrics"]["vllm/generation_tokens"], 3)
        self.assertEqual(server.exit(), 0)
        self.assertEqual(client.targets(), [])

    def test_non_loopback_vllmstat_with_token(self):
        addr = _routed_or_none()
        if addr is None:
            self.skipTest("this machine has no non-loopback address")
        self.vs = Vllmstat(self.tmp, listen="0.0.0.0:0", token="tok-123")
        port = int(self.vs.url.rsplit(":", 1)[1])
        api = "http://%s:%d" % (addr, port)
        client = Client(api, token="tok-123", strict=True, timeout=WAIT)
        c = self.child(env={"VLLMSTAT_API_TOKEN": "tok-123"})
        url, _ = c.expose(api)
        # served on the address that routes to vllmstat, not on loopback
        self.assertEqual(url.split("/")[2].rsplit(":", 1)[0], addr)
        self.assertEqual(client.targets(), [url])
        wait_for(lambda: scraped_ok(client, url), "a first scrape of " + url)
        c.inc("generation_tokens", 6)
        self.check_step(client.end_step(5), 5, [c])
        self.assertEqual(c.exit(), 0)
        self.assertEqual(client.targets(), [])

    def test_wrong_token_warns_once_and_stops(self):
        self.vs = Vllmstat(self.tmp, token="right")
        c = self.child(env={"VLLMSTAT_API_TOKEN": "wrong"})
        url, _ = c.expose(self.vs.url)
        self.assertTrue(url)
        c.err.expect("cannot register .*HTTP 401")
        self.assertEqual(Client(self.vs.url, token="right", strict=True).targets(), [])
        self.assertEqual(c.exit(), 0)
        self.assertNotIn("retrying", c.err.text(eof=True))


def _routed_or_none():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr


class AddRemoveTargets(unittest.TestCase):
    def test_add_and_remove_are_idempotent(self):
        tmp = tempfile.mkdtemp()
        vs = Vllmstat(tmp)
        try:
            c = Client(vs.url, strict=True, timeout=WAIT)
            u1, u2 = "http://127.0.0.1:1/metrics", "http://127.0.0.1:2/metrics"
            self.assertEqual(c.add_targets([u1]), [u1])
            self.assertEqual(c.add_targets([u1, u2]), [u1, u2])
            self.assertEqual(c.add_targets([u2]), [u1, u2])
            self.assertEqual(c.remove_targets([u1, "http://127.0.0.1:3/metrics"]), [u2])
            self.assertEqual(c.remove_targets([u1]), [u2])
            with self.assertRaises(VllmstatError) as cm:
                c.add_targets(["ftp://x/metrics"])
            self.assertEqual(cm.exception.status, 400)
            self.assertEqual(c.targets(), [u2])

            lax = Client(vs.url, timeout=WAIT)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                self.assertEqual(lax.add_targets(["ftp://x/metrics"]), [])
                self.assertEqual(lax.add_targets(["ftp://x/metrics"]), [])  # the same refusal: counted
                self.assertEqual(lax.remove_targets(["ftp://x/metrics"]), [])  # another call's refusal
            self.assertEqual([str(x.message).partition(": targets")[0] for x in w],
                             ["vllmstat: POST /v1/targets: HTTP 400", "vllmstat: DELETE /v1/targets: HTTP 400"])
            self.assertEqual(lax.remove_targets([u2]), [])
            self.assertEqual(lax.targets(), [])
        finally:
            vs.stop()
            vs.proc.stderr.close()
            shutil.rmtree(tmp, ignore_errors=True)


class SlowAPI:
    """A stand-in for vllmstat on loopback whose POST /v1/targets answers after delay seconds,
    or never (delay None: the connection is accepted and read, and stays unanswered until
    close()). Other calls are answered at once. Keeps every request as (method, path, body)."""

    def __init__(self, delay):
        self.requests = []
        self.posted = threading.Event()  # a POST /v1/targets came in
        self.answered = threading.Event()  # a POST /v1/targets is being answered
        self._closing = threading.Event()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                api.requests.append((self.command, self.path, body))
                urls = (body or {}).get("targets", [])
                if self.command == "POST" and self.path == "/v1/targets":
                    api.posted.set()
                    if api._closing.wait(delay):
                        return  # closing: no answer
                    api.answered.set()
                else:
                    urls = []
                raw = json.dumps({"targets": urls}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_DELETE = do_POST

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def calls(self, method):
        return [(p, b) for m, p, b in self.requests if m == method]

    def close(self):
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


# expose() waits at most 0.5 s for vllmstat's answer to its first registration call; the rest
# of this bound is slack for a loaded machine.
FIRST_CALL_BOUND = 1.5


class FirstRegistration(Processes):
    """expose() against a vllmstat that answers late or never: it returns within its bound."""

    def api(self, delay):
        api = SlowAPI(delay)
        self.addCleanup(api.close)
        return api

    def test_never_answered_returns_within_the_bound(self):
        api = self.api(None)
        c = self.child()
        url, again = c.expose(api.url)
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")
        self.assertEqual(again, url)
        self.assertLess(c.expose_calls[0], FIRST_CALL_BOUND, "expose() waited on an unanswered call")
        self.assertLess(c.expose_calls[1], FIRST_CALL_BOUND, "expose() again waited on an unanswered call")
        wait_for(api.posted.is_set, "the registration call")
        self.assertFalse(api.answered.is_set())
        # the call goes on in the background: when it times out, one warning, then retries
        c.err.expect(r"cannot register .*timed out.*retrying in the background")
        self.assertEqual(urllib.request.urlopen(url, timeout=WAIT).status, 200)
        self.assertEqual(c.exit(), 0)
        self.assertEqual(api.calls("DELETE"), [])  # nothing was registered
        self.assertEqual(c.err.text(eof=True).count("vllmstat: cannot register"), 1, c.err.text())

    def test_late_answer_completes_registration_in_the_background(self):
        api = self.api(2.0)  # vllmstat's own bound on waiting for the page's first scrape
        c = self.child()
        url, again = c.expose(api.url)
        self.assertEqual(again, url)
        self.assertLess(c.expose_calls[0], FIRST_CALL_BOUND, "expose() waited for the late answer")
        self.assertLess(c.expose_calls[1], FIRST_CALL_BOUND)
        wait_for(api.answered.is_set, "the late answer")
        # the process registered the page in the background, so it deregisters it at exit
        self.assertEqual(c.exit(), 0)
        self.assertEqual(api.calls("POST"), [("/v1/targets", {"targets": [url]})])
        self.assertEqual(api.calls("DELETE"), [("/v1/targets", {"targets": [url]})])
        self.assertNotIn("Warning", c.err.text(eof=True))

    def test_answer_within_the_bound_is_waited_for(self):
        api = self.api(0.1)  # well inside the 0.5 s that expose() waits
        c = self.child()
        url, _ = c.expose(api.url)
        self.assertTrue(api.answered.is_set(), "expose() returned before vllmstat answered")
        self.assertGreaterEqual(c.expose_calls[0], 0.1, "expose() returned before vllmstat answered")
        self.assertLess(c.expose_calls[0], FIRST_CALL_BOUND)
        self.assertEqual(c.exit(), 0)
        self.assertEqual(api.calls("DELETE"), [("/v1/targets", {"targets": [url]})])
        self.assertNotIn("Warning", c.err.text(eof=True))


class Fork(Processes):
    """A process that forks after expose(): the child has no part in the parent's page."""

    def start(self):
        self.vs = Vllmstat(self.tmp)
        client = Client(self.vs.url, strict=True, timeout=WAIT)
        p = self.child()
        p.expose(self.vs.url)
        wait_for(lambda: scraped_ok(client, p.url), "a first scrape of " + p.url)
        return client, p

    def still_scraped(self, client, url):
        n = good_scrapes(client, url)
        self.assertGreaterEqual(n, 1, "%s is no longer a target" % url)
        wait_for(lambda: good_scrapes(client, url) >= n + 2, "more scrapes of " + url)

    def test_child_exit_leaves_the_parent_registered(self):
        client, p = self.start()
        p.inc("generation_tokens", 5)
        status, _, _ = p.fork("exit")
        self.assertEqual(status, "0")
        self.assertEqual(client.targets(), [p.url], "the child's exit removed the parent's page")
        self.still_scraped(client, p.url)
        p.inc("generation_tokens", 7)
        self.check_step(client.end_step(0), 0, [p])
        self.assertEqual(p.exit(), 0)
        self.assertEqual(client.targets(), [])  # the parent removes its own page at its exit
        self.assertNotIn("Warning", p.err.text(eof=True))

    def test_child_forked_during_a_registration_call_exits(self):
        api = SlowAPI(None)
        self.addCleanup(api.close)
        p = self.child()
        p.cmd("expose-in-thread " + api.url)
        wait_for(api.posted.is_set, "the registration call")
        status, _, _ = p.fork("exit")
        self.assertEqual(status, "0", "the child did not exit (forked with the registration call under way)")

    def test_child_exposes_a_page_of_its_own(self):
        client, p = self.start()
        status, _, report = p.fork("expose", self.vs.url)
        self.assertEqual(status, "0")
        url, there = report.split()
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")
        self.assertNotEqual(url, p.url, "the child's expose() returned the parent's page")
        self.assertEqual(there, "True", "the child's page was not registered while it lived")
        # the child removed its own page at its exit, and only that
        self.assertEqual(client.targets(), [p.url])
        self.still_scraped(client, p.url)
        self.assertEqual(p.exit(), 0)
        self.assertEqual(client.targets(), [])

    def test_child_forked_inside_expose_exposes_a_page_of_its_own(self):
        client, p = self.start()
        p.send("fork-in-expose " + self.vs.url)
        status, _, report = p.forked()
        self.assertEqual(status, "0", "the child did not exit (forked while another thread was in expose())")
        url, there = report.split()
        self.assertNotEqual(url, p.url)
        self.assertEqual(there, "True")
        self.assertEqual(client.targets(), [p.url])
        self.still_scraped(client, p.url)
        self.assertEqual(p.exit(), 0)
        self.assertEqual(client.targets(), [])

    def test_multiprocessing_child_exposes_a_page_of_its_own(self):
        client, p = self.start()
        p.inc("generation_tokens", 5)
        p.send("mp-start " + self.vs.url)
        url = p.out.expect(r"^mp (\S+)").group(1)
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")
        self.assertNotEqual(url, p.url, "the child's expose() returned the parent's page")
        wait_for(lambda: sorted(client.targets()) == sorted([p.url, url]), "the child's page among the targets")
        # each page is its own process's registry: the child counted 1000 more after the fork
        line = 'vllm:generation_tokens_total{engine="0",model_name="test-model"} %s'
        self.assertIn(line % "1005.0", urllib.request.urlopen(url, timeout=WAIT).read().decode())
        self.assertIn(line % "5.0", urllib.request.urlopen(p.url, timeout=WAIT).read().decode())
        p.send("mp-exit")
        self.assertEqual(p.out.expect(r"^mp-exit (\S+)").group(1), "0")
        # the child removed its own page as multiprocessing ended it, and only that
        self.assertEqual(client.targets(), [p.url])
        self.still_scraped(client, p.url)
        self.assertEqual(p.exit(), 0)
        self.assertEqual(client.targets(), [])


class ServedPage(unittest.TestCase):
    """The page server itself, in this process, on a registry of its own."""

    def setUp(self):
        need(HAVE_PROM, "prometheus_client is not importable in %s (run with /usr/bin/python3)" % sys.executable)
        from prometheus_client import CollectorRegistry, Counter
        self.registry = CollectorRegistry()
        Counter("vllm:generation_tokens", "Number of generation tokens processed.",
                labelnames=["model_name", "engine"], registry=self.registry).labels("m", "0").inc(3)
        self.exp = vllmstat_client._Exposure("127.0.0.1", "127.0.0.1", 0, self.registry)

    def tearDown(self):
        self.exp.close()

    def test_gzip_when_asked(self):
        req = urllib.request.Request(self.exp.url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=WAIT) as resp:
            self.assertEqual(resp.headers.get("Content-Encoding"), "gzip")
            body = gzip.decompress(resp.read()).decode()
        self.assertIn('vllm:generation_tokens_total{engine="0",model_name="m"} 3.0', body)
        with urllib.request.urlopen(self.exp.url, timeout=WAIT) as resp:
            self.assertIsNone(resp.headers.get("Content-Encoding"))
            self.assertIn("vllm:generation_tokens_total", resp.read().decode())

    def test_concurrent_scrapes(self):
        # a collector that lets a scrape finish only while another is in progress: a server
        # answering one scrape at a time would never complete either
        barrier = threading.Barrier(2, timeout=WAIT)

        class Meeting:
            def collect(self):
                barrier.wait()
                return []

        self.registry.register(Meeting())
        results = []

        def get():
            with urllib.request.urlopen(self.exp.url, timeout=WAIT) as resp:
                results.append(resp.status)

        threads = [threading.Thread(target=get) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        self.assertEqual(results, [200, 200])

    def test_url_is_the_bound_port(self):
        port = int(self.exp.url.split(":")[2].split("/")[0])
        self.assertGreater(port, 0)
        self.assertTrue(self.exp.url.endswith("/metrics"))
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT):
            pass


class HostChoice(unittest.TestCase):
    def test_loopback_and_override(self):
        self.assertEqual(vllmstat_client._choose_host("http://127.0.0.1:9400", None), ("127.0.0.1", "127.0.0.1"))
        self.assertEqual(vllmstat_client._choose_host("http://localhost:9400", None), ("127.0.0.1", "127.0.0.1"))
        self.assertEqual(vllmstat_client._choose_host("http://[::1]:9400", None), ("::1", "::1"))
        self.assertEqual(vllmstat_client._choose_host("http://10.1.2.3:9400", "10.9.9.9"), ("10.9.9.9", "10.9.9.9"))

    def test_routed_address(self):
        addr = _routed_or_none()
        if addr is None:
            self.skipTest("this machine has no non-loopback address")
        # the machine's own address routes to itself: it is what a remote vllmstat would reach
        self.assertEqual(vllmstat_client._choose_host("http://%s:9400" % addr, None), (addr, addr))
        self.assertEqual(vllmstat_client._choose_host("http://%s:9400" % addr, "0.0.0.0"), ("0.0.0.0", addr))

    def test_unservable_returns_empty_and_warns(self):
        need(HAVE_PROM, "prometheus_client is not importable in %s" % sys.executable)
        saved = vllmstat_client._exposure
        try:
            vllmstat_client._exposure = None
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                # 198.51.100.7 (TEST-NET-2) is no address of this machine: binding it fails
                self.assertEqual(vllmstat_client.expose("http://127.0.0.1:1", host="198.51.100.7"), "")
            self.assertEqual(len(w), 1)
            self.assertIn("cannot serve", str(w[0].message))
            self.assertIsNone(vllmstat_client._exposure)
        finally:
            vllmstat_client._exposure = saved


class RayTargets(unittest.TestCase):
    """ray_targets() against a stand-in for ray.nodes() (Ray itself is not installed here)."""

    def with_ray(self, nodes, initialized=True):
        fake = types.ModuleType("ray")
        fake.nodes = lambda: nodes
        fake.is_initialized = lambda: initialized
        saved = sys.modules.get("ray")
        sys.modules["ray"] = fake
        self.addCleanup(lambda: sys.modules.__setitem__("ray", saved) if saved else sys.modules.pop("ray", None))

    def test_alive_nodes_metrics_agents(self):
        self.with_ray([
            {"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.1", "MetricsExportPort": 52001},
            {"NodeID": "b", "Alive": False, "NodeManagerAddress": "10.0.0.2", "MetricsExportPort": 52001},
            {"NodeID": "c", "Alive": True, "NodeManagerAddress": "10.0.0.3", "MetricsExportPort": 8080},
            {"NodeID": "d", "Alive": True, "NodeManagerAddress": "fd00::4", "MetricsExportPort": 52001},
            {"NodeID": "e", "Alive": True, "NodeManagerAddress": "10.0.0.5"},  # no metrics agent
        ])
        self.assertEqual(ray_targets(), ["http://10.0.0.1:52001/metrics", "http://10.0.0.3:8080/metrics",
                                         "http://[fd00::4]:52001/metrics"])

    def test_not_initialized(self):
        self.with_ray([], initialized=False)
        with self.assertRaisesRegex(RuntimeError, "ray.init"):
            ray_targets()

    def test_not_installed(self):
        saved = sys.modules.get("ray")
        sys.modules["ray"] = None  # makes `import ray` fail
        try:
            with self.assertRaisesRegex(ImportError, "needs Ray"):
                ray_targets()
        finally:
            if saved:
                sys.modules["ray"] = saved
            else:
                sys.modules.pop("ray", None)


if __name__ == "__main__":
    unittest.main()
