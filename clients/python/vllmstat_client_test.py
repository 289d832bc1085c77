"""Tests of vllmstat_client against a real `vllmstat run` scraping a real `vllmstat sim`.

The vllmstat binary comes from VLLMSTAT_BIN, or is built with `go build` from this repository.
Run: python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
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


def read_until(proc, pattern, timeout=30):
    """Reads proc's stream (stdout for sim, stderr for run) until a line matches pattern."""
    stream = proc.stdout
    deadline = time.time() + timeout
    lines = []
    while time.time() < deadline:
        line = stream.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(pattern, line)
        if m:
            return m, lines
    raise AssertionError("no line matching %r in:\n%s" % (pattern, "".join(lines)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Fleet:
    """A `vllmstat sim` fleet and a `vllmstat run` sidecar with its API."""

    def __init__(self, tmp, token=None):
        self.tmp = tmp
        self.bin = vllmstat_bin(tmp)
        self.sim = subprocess.Popen(
            [self.bin, "sim", "--servers", "2", "--dp", "2", "--port", "0", "--speed", "4", "--seed", "3"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        urls = []
        while len(urls) < 2:
            m, _ = read_until(self.sim, r"(http://\S+/metrics)")
            urls.append(m.group(1))
        self.urls = urls
        self.out = os.path.join(tmp, "out")
        self.rec = os.path.join(tmp, "rec.jsonl.gz")
        self.port = free_port()
        env = dict(os.environ)
        if token:
            env["VLLMSTAT_API_TOKEN"] = token
        args = [self.bin, "run", "--listen", "127.0.0.1:%d" % self.port, "--step-every", "0",
                "--interval", "0.2", "--out", self.out, "--record", self.rec, "--per-worker"]
        for u in urls:
            args += ["--target", u]
        self.run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.run.stdout = self.run.stderr  # read_until reads .stdout
        read_until(self.run, r"api listening")
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        # the sidecar first: on SIGINT it scrapes the fleet once more to close the open step
        codes = []
        for p in (self.run, self.sim):
            if p.poll() is None:
                p.send_signal(2)
            codes.append(p.wait(timeout=30))
        for p in (self.run, self.sim):
            if p.stdout:
                p.stdout.close()
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
        c = Client("http://127.0.0.1:%d" % free_port(), timeout=2)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(c.end_step(1), {})
            self.assertEqual(c.end_step(2), {})
            self.assertEqual(c.steps(), [])
            self.assertFalse(c.health())
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        self.assertIn("cannot reach", str(w[0].message))

    def test_strict_raises(self):
        c = Client("http://127.0.0.1:%d" % free_port(), timeout=2, strict=True)
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
