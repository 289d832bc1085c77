"""Tests of the scrape-cost benchmark's pieces: the generated registry renders the fixture's
series, and the served page honours name[] and gzip, over real HTTP on loopback.

    /usr/bin/python3 -m unittest discover -s bench/engine -p '*_test.py' -v
(run from the repository root, where the fixture path resolves).
"""

import importlib.util
import os
import tempfile
import unittest

import bench
import vllmpage
from prometheus_client import generate_latest

NAMES = ["vllm:num_requests_running", "vllm:prefix_cache_hits_total",
         "vllm:time_to_first_token_seconds_bucket", "vllm:spec_decode_num_drafts_total"]


def fixture():
    with open(vllmpage.DEFAULT_FIXTURE, encoding="utf-8") as f:
        return f.read()


def have_uvicorn():
    if all(importlib.util.find_spec(m) for m in ("uvicorn", "uvloop", "httptools")):
        return True
    if os.environ.get("CI") == "true":
        raise AssertionError("uvicorn, uvloop or httptools is missing (python3-uvicorn, "
                             "python3-uvloop, python3-httptools)")
    print("\n*** SKIPPING the ASGI test: install python3-uvicorn python3-uvloop "
          "python3-httptools ***")
    return False


class RegistryTest(unittest.TestCase):
    def test_renders_the_fixtures_series(self):
        want, got, missing, extra = vllmpage.compare(
            fixture(), generate_latest(vllmpage.build(fixture())).decode())
        self.assertGreater(len(want), 300)
        self.assertEqual(missing, [])
        self.assertEqual(extra, [])

    def test_populated_gives_every_family_series(self):
        text = generate_latest(vllmpage.build(fixture(), populated=True)).decode()
        empty = [f.name for f in vllmpage.text_string_to_metric_families(text) if not f.samples]
        self.assertEqual(empty, [])
        self.assertTrue(vllmpage.series(fixture()) <= vllmpage.series(text))


class ServedTest(unittest.TestCase):
    def client(self, server):
        c = bench.Client(server.port)
        self.addCleanup(c.close)
        return c

    def check_restricted(self, server):
        client = self.client(server)
        full = bench.sample_names(bench.page_text(*client.get("/metrics", False)))
        r, body = client.get(bench.query(NAMES), True)
        self.assertEqual(r.getheader("Content-Encoding"), "gzip")
        self.assertEqual(bench.sample_names(bench.page_text(r, body)), full & set(NAMES))
        self.assertIn("vllm:num_requests_running", full)
        self.assertNotIn("vllm:spec_decode_num_drafts_total", full)

    def test_wsgi_honours_name_and_gzip(self):
        with bench.Server("--app", "wsgi") as server:
            self.check_restricted(server)

    def test_asgi_with_query_fix_honours_name_and_gzip(self):
        if not have_uvicorn():
            self.skipTest("no uvicorn")
        with bench.Server("--app", "asgi", "--asgi-query-fix") as server:
            self.check_restricted(server)

    def test_multiprocess_registry_answers_name_with_an_empty_page(self):
        with tempfile.TemporaryDirectory() as d, \
                bench.Server("--app", "wsgi", "--multiproc", d) as server:
            client = self.client(server)
            full = bench.page_text(*client.get("/metrics", False))
            self.assertIn("vllm:num_requests_running", bench.sample_names(full))
            r, body = client.get(bench.query(NAMES), False)
            self.assertEqual(r.status, 200)
            self.assertEqual(body, b"")


if __name__ == "__main__":
    unittest.main()
