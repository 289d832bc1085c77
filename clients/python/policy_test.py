"""Tests of Client.set_policy_version against a real `vllmstat run` scraping a real `vllmstat sim`,
and against stand-ins that fail.

The vllmstat binary comes from VLLMSTAT_BIN, or is built with `go build` from this repository.
Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import gzip
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllmstat_client import Client, VllmstatError  # noqa: E402
from vllmstat_client_test import FakeAPI, Fleet, Unreachable  # noqa: E402


class PolicyAgainstRealRun(unittest.TestCase):
    """The trainer's versions, published to a real run of a simulated fleet whose engines report
    no version and never pause: after a publish every engine is behind, and generates stale
    tokens."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.fleet = Fleet(self.tmp)

    def tearDown(self):
        self.fleet.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_versions_in_the_step_records(self):
        c = Client(self.fleet.url, strict=True, timeout=30)
        time.sleep(0.5)
        first = c.end_step(1)
        self.assertFalse([k for k in first["metrics"] if k.startswith("vllm/policy/")], first["metrics"])

        out = c.set_policy_version(1)
        self.assertEqual(out["version"], 1)
        self.assertIn("ts", out)
        # the engines generate on, on the weights they had: wait for the open step to say so
        deadline = time.monotonic() + 30
        while c.live()["step"]["metrics"].get("vllm/policy/stale_generation_tokens", 0) == 0:
            self.assertLess(time.monotonic(), deadline, "no stale tokens within 30 s of the publish")
            time.sleep(0.1)
        rec = c.end_step(2)
        m = rec["metrics"]
        self.assertEqual(m["vllm/policy/version"], 1)
        self.assertEqual(m["vllm/policy/engines_behind"], rec["workers"])
        self.assertGreater(m["vllm/policy/stale_generation_tokens"], 0)
        self.assertLessEqual(m["vllm/policy/stale_generation_tokens"], m["vllm/generation_tokens"])
        self.assertNotIn("vllm/policy/engine_version_min", m)  # no engine reports a version

        with self.assertRaises(VllmstatError) as cm:
            c.set_policy_version(1)
        self.assertEqual(cm.exception.status, 409)
        self.assertIn("the last one published is 1", str(cm.exception))
        with self.assertRaises(ValueError):
            c.set_policy_version(-1)
        with self.assertRaises(ValueError):
            c.set_policy_version(True)

        lenient = Client(self.fleet.url, timeout=30)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIsNone(lenient.set_policy_version(1))
            self.assertIsNone(lenient.set_policy_version(0))  # the same refusal: told once
            self.assertIsNone(lenient.set_policy_version("2"))
            self.assertEqual(lenient.set_policy_version(2)["version"], 2)
        self.assertEqual(len(w), 2, [str(x.message) for x in w])
        self.assertIn("HTTP 409", str(w[0].message))
        self.assertIn("policy version must be a whole number", str(w[1].message))
        self.assertEqual(w[0].filename, __file__)  # pointing at the trainer's line

        self.assertEqual(self.fleet.stop(), [0, 0])
        with gzip.open(self.fleet.rec, "rt") as f:
            published = [json.loads(l)["version"] for l in f if '"kind":"policy"' in l]
        self.assertEqual(published, [1, 2])


class NamedVersionsAgainstRealRun(unittest.TestCase):
    """A real run of a simulated SGLang fleet whose servers answer their versions as strings, as
    SGLang keeps them: "default" before any update."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.fleet = Fleet(self.tmp, sim_args=["--engine", "sglang", "--version-tag", "step-"])

    def tearDown(self):
        self.fleet.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_initial_weights_and_names(self):
        c = Client(self.fleet.url, strict=True, timeout=30)
        out = c.set_policy_version(0)  # at the start: the engines hold their initial weights
        self.assertEqual(out["version"], 0)
        self.assertNotIn("name", out)
        deadline = time.monotonic() + 30
        while c.live()["step"]["metrics"].get("sglang/generation_tokens", 0) == 0:
            self.assertLess(time.monotonic(), deadline, "no tokens within 30 s")
            time.sleep(0.1)
        m = c.end_step(1)["metrics"]
        self.assertGreater(m["sglang/generation_tokens"], 0)
        self.assertEqual(m["sglang/policy/stale_generation_tokens"], 0, m)
        self.assertEqual(m["sglang/policy/engines_behind"], 0, m)
        self.assertEqual(m["sglang/policy/engine_version_max"], 0, m)

        out = c.set_policy_version(1, name="step-1")
        self.assertEqual((out["version"], out["name"]), (1, "step-1"))
        with self.assertRaises(VllmstatError) as cm:
            c.set_policy_version(2, name="step-1")
        self.assertEqual(cm.exception.status, 409)
        for bad in ("", "x" * 257, "step-2\x1b[2J", 2):
            with self.assertRaises(ValueError) as cm:
                c.set_policy_version(2, name=bad)
            self.assertIn("policy version name", str(cm.exception))
            self.assertNotIn("\x1b", str(cm.exception))  # escaped, never raw
        lenient = Client(self.fleet.url, timeout=30)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIsNone(lenient.set_policy_version(2, name="a\nb"))
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        self.assertIn("policy version name", str(w[0].message))
        self.assertEqual(w[0].filename, __file__)


class PolicyFailures(unittest.TestCase):
    def test_unreachable_returns_none_and_warns_once(self):
        with Unreachable() as dead, warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c = Client(dead.url, timeout=2)
            self.assertIsNone(c.set_policy_version(1))
            self.assertIsNone(c.set_policy_version(2))
        self.assertEqual(len(w), 1, [str(x.message) for x in w])
        with Unreachable() as dead:
            with self.assertRaises(VllmstatError):
                Client(dead.url, timeout=2, strict=True).set_policy_version(1)

    def test_sends_the_version(self):
        api = FakeAPI()
        self.addCleanup(api.close)
        api.answers["/v1/policy"] = (200, {"version": 7, "ts": "2026-01-01T00:00:00Z"})
        out = Client(api.url, strict=True).set_policy_version(7)
        self.assertEqual(out, {"version": 7, "ts": "2026-01-01T00:00:00Z"})
        self.assertEqual(api.requests[-1], ("POST", "/v1/policy", {"version": 7}))
        api.answers["/v1/policy"] = (200, {"version": 8, "name": "step-8", "ts": "2026-01-01T00:00:00Z"})
        self.assertEqual(Client(api.url, strict=True).set_policy_version(8, name="step-8")["name"], "step-8")
        self.assertEqual(api.requests[-1], ("POST", "/v1/policy", {"version": 8, "name": "step-8"}))
        api.answers["/v1/policy"] = (500, {"error": "boom"})
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIsNone(Client(api.url).set_policy_version(8))
        self.assertEqual(len(w), 1)
        self.assertIn("boom", str(w[0].message))


if __name__ == "__main__":
    unittest.main()
