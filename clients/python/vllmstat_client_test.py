"""Tests of vllmstat_client against a real `vllmstat run` scraping a real `vllmstat sim`.

The vllmstat binary comes from VLLMSTAT_BIN, or is built with `go build` from this repository.
Run: python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import gzip
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
from vllmstat_client import Client, VllmstatError, log_to  # noqa: E402

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


class Fleet:
    """A `vllmstat sim` fleet and a `vllmstat run` sidecar with its API."""

    def __init__(self, tmp, token=None):
        self.tmp = tmp
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
            [self.bin, "sim", "--servers", "2", "--dp", "2", "--port", "0", "--speed", "4", "--seed", "3"],
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
        # what end_step returned is exactly what was written; SIGINT closed one more step
        self.assertEqual(lines[:3], got)
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[3]["step"], 6)

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
        self.assertEqual(sum(l["metrics"].get("vllm/generation_tokens", 0) for l in lines), truth)


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
            Client().end_step(-1)
        with self.assertRaises(ValueError):
            Client().end_step("3")


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


if __name__ == "__main__":
    unittest.main()
