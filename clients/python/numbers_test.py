"""Tests of the step numbers and policy versions the client takes, and of how it tells about the
calls it refuses or that fail: against a stand-in API (FakeAPI) that keeps what it was sent.

Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import os
import sys
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllmstat_client import Client, VllmstatError  # noqa: E402
from vllmstat_client_test import FakeAPI, FakeClock, Unreachable  # noqa: E402

try:
    import numpy
except ImportError:
    numpy = None


class Index:
    """An integer of another library (numpy's, torch's): whole, but not an int."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n

    def __repr__(self):
        return "Index(%d)" % self.n


# Values that are whole numbers, and the int each stands for.
WHOLE = [(7, 7), (Index(7), 7), (7.0, 7), (0, 0), (0.0, 0)]
# Values that are not: strings (of any base, or decimal), bools, fractions, NaN, negatives.
NOT_WHOLE = ["010", "7", "0x8", "0b1000", "0o10", True, False, 2.5, float("nan"), float("inf"), -1, Index(-1),
             None, b"7", [7]]


class Numbers(unittest.TestCase):

    def setUp(self):
        self.api = FakeAPI()
        self.addCleanup(self.api.close)
        self.api.answers["/v1/steps/end"] = (200, {"step": 7, "metrics": {}})
        self.api.answers["/v1/policy"] = (200, {"version": 7, "ts": "2026-01-01T00:00:00Z"})
        for n in (0, 7):
            self.api.answers["/v1/steps?since=%d" % n] = (200, {"steps": [{"step": 7}]})
            self.api.answers["/v1/steps/%d" % n] = (200, {"step": 7})

    def client(self, **kw):
        c = Client(self.api.url, timeout=5, **kw)
        c._version_checked = True  # no version request among the ones looked at here
        return c

    def sent(self):
        return [(p, b) for _, p, b in self.api.requests]

    def test_whole_values_are_sent_as_ints(self):
        for value, n in WHOLE:
            for strict in (False, True):
                with self.subTest(value=value, strict=strict):
                    self.api.requests.clear()
                    c = self.client(strict=strict)
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")  # no warning either
                        self.assertEqual(c.end_step(value), {"step": 7, "metrics": {}})
                        self.assertEqual(c.set_policy_version(value)["version"], 7)
                        self.assertEqual(c.steps(since=value), [{"step": 7}])
                        self.assertEqual(c.step(value), {"step": 7})
                    self.assertEqual(self.sent(), [("/v1/steps/end", {"step": n}), ("/v1/policy", {"version": n}),
                                                   ("/v1/steps?since=%d" % n, None), ("/v1/steps/%d" % n, None)])
                    self.assertIs(type(self.sent()[0][1]["step"]), int)

    def test_numpy_integers(self):
        if numpy is None:  # not a prerequisite, in CI either: Index stands in for numpy's integers
            msg = "SKIPPED LOUDLY: numpy is not installed in this Python: numpy's integers are not tried"
            sys.stderr.write("\n*** %s ***\n" % msg)
            self.skipTest(msg)
        c = self.client(strict=True)
        self.assertEqual(c.end_step(numpy.int64(7)), {"step": 7, "metrics": {}})
        self.assertEqual(c.set_policy_version(numpy.int32(7))["version"], 7)
        self.assertEqual(c.end_step(numpy.float64(7.0)), {"step": 7, "metrics": {}})
        self.assertEqual(self.sent(), [("/v1/steps/end", {"step": 7}), ("/v1/policy", {"version": 7}),
                                       ("/v1/steps/end", {"step": 7})])
        with self.assertRaises(ValueError):
            c.end_step(numpy.bool_(True))

    def test_other_values_are_refused_before_any_request(self):
        strict, lenient = self.client(strict=True), self.client()
        for value in NOT_WHOLE:
            with self.subTest(value=value):
                for call in (strict.end_step, strict.set_policy_version, strict.step, strict.steps):
                    with self.assertRaisesRegex(ValueError, "whole number", msg=call.__name__):
                        call(value)
                lenient = self.client()
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    self.assertEqual(lenient.end_step(value), {})  # never raises when not strict
                    self.assertIsNone(lenient.set_policy_version(value))
                    self.assertEqual(lenient.step(value), {})
                    self.assertEqual(lenient.steps(value), [])
                msgs = [str(x.message) for x in w]
                self.assertEqual(len(msgs), 4, msgs)  # each call is another kind of refusal
                self.assertIn("step must be a whole number from 0 to 2**53, got %r" % (value,), msgs[0])
                self.assertIn("policy version must be a whole number from 0 to 2**53, got %r" % (value,), msgs[1])
                self.assertTrue(all(x.filename == __file__ for x in w), [x.filename for x in w])  # the trainer's line
        self.assertEqual(self.api.requests, [])


class Refusals(unittest.TestCase):
    """Every refused or failed call is told: at most once per kind of refusal every warn_every
    seconds, and the next warning of that kind counts the calls not told about."""

    def setUp(self):
        self.api = FakeAPI()
        self.addCleanup(self.api.close)
        self.clock = FakeClock()

    def client(self, **kw):
        c = Client(self.api.url, timeout=5, clock=self.clock, **kw)
        c._version_checked = True
        return c

    def test_a_refused_step_end_is_told_again_after_warn_every(self):
        self.api.answers["/v1/steps/end"] = (409, {"error": "step number must be greater than the last step"})
        c = self.client(warn_every=60)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(c.end_step(2), {})
            self.assertEqual(c.end_step(1), {})  # within 60 s: counted
            self.clock.now += 30
            self.assertEqual(c.end_step(1), {})
            self.clock.now += 30
            self.assertEqual(c.end_step(1), {})  # 60 s after the first warning: told, with the count
            self.assertEqual(c.end_step(1), {})
            self.clock.now += 61
            self.assertEqual(c.end_step(1), {})
        self.assertEqual([str(x.message) for x in w], [
            "vllmstat: POST /v1/steps/end: HTTP 409: step number must be greater than the last step",
            "vllmstat: POST /v1/steps/end: HTTP 409: step number must be greater than the last step "
            "(2 more like it since the last warning)",
            "vllmstat: POST /v1/steps/end: HTTP 409: step number must be greater than the last step "
            "(1 more like it since the last warning)",
        ])
        self.assertTrue(all(x.filename == __file__ for x in w), [x.filename for x in w])

    def test_the_same_warning_is_shown_again_with_python_s_default_filter(self):
        # Python's "default" action shows a message once per line; a refusal told again after
        # warn_every must still be seen.
        self.api.answers["/v1/steps/end"] = (409, {"error": "step number must be greater than the last step"})
        c = self.client(warn_every=60)
        with warnings.catch_warnings(record=True) as w:
            warnings.resetwarnings()
            warnings.simplefilter("default")
            for _ in range(3):
                self.assertEqual(c.end_step(1), {})
                self.clock.now += 61
        self.assertEqual(len(w), 3, [str(x.message) for x in w])

    def test_kinds_are_apart(self):
        self.api.answers["/v1/steps/end"] = (409, {"error": "step number must be greater than the last step"})
        self.api.answers["/v1/policy"] = (409, {"error": "the last one published is 9"})
        c = self.client()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c.end_step(1)
            c.set_policy_version(3)
            c.end_step(2.5)  # refused here, not by vllmstat
            c.end_step(1)
            c.set_policy_version(3)
            c.end_step(-1)
        self.assertEqual(len(w), 3, [str(x.message) for x in w])
        self.assertIn("HTTP 409: step number", str(w[0].message))
        self.assertIn("HTTP 409: the last one published is 9", str(w[1].message))
        self.assertIn("step must be a whole number", str(w[2].message))

    def test_an_unreachable_vllmstat_is_told_again(self):
        with Unreachable() as dead, warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c = Client(dead.url, timeout=2, clock=self.clock, warn_every=60)
            for _ in range(3):
                self.assertEqual(c.end_step(1), {})
            self.clock.now += 60
            self.assertEqual(c.steps(), [])
        self.assertEqual(len(w), 2, [str(x.message) for x in w])
        self.assertIn("cannot reach", str(w[0].message))
        self.assertIn("(2 more like it since the last warning)", str(w[1].message))


if __name__ == "__main__":
    unittest.main()
