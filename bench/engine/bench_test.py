"""Tests of the scrape-cost benchmarks' pieces: the generated registry renders the fixture's
series (for any number of engines), the served page honours name[] and gzip, over real HTTP
on loopback, snapshot.py turns a registry into the objects get_metrics_snapshot() makes, and
actor.py runs (its figures are printed, never checked here).

    /usr/bin/python3 -m unittest discover -s bench/engine -p '*_test.py' -v
(run from the repository root, where the fixture path resolves).
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

import actor
import bench
import snapshot
import trtllm
import vllmpage
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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

    def test_engines(self):
        two = vllmpage.series(generate_latest(vllmpage.build(fixture(), populated=True)).decode())
        for n in (1, 2, 8):
            text = generate_latest(vllmpage.build(fixture(), populated=True, engines=n)).decode()
            engines = {dict(labels).get("engine") for _, labels in vllmpage.series(text)} - {None}
            self.assertEqual(engines, {str(e) for e in range(n)})
            per_engine = [s for s in vllmpage.series(text) if dict(s[1]).get("engine") == "0"]
            self.assertEqual(sorted(per_engine), sorted(s for s in two if dict(s[1]).get("engine") == "0"))


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


class SnapshotTest(unittest.TestCase):
    def test_objects_of_each_kind(self):
        reg = CollectorRegistry()
        Gauge("vllm:num_requests_running", "r", ["engine"], registry=reg).labels("0").set(3)
        Gauge("other_gauge", "not vLLM's", registry=reg).set(1)
        Counter("vllm:generation_tokens", "g", ["engine"], registry=reg).labels("1").inc(7.9)
        per_pos = Counter(snapshot.PER_POSITION, "p", ["engine", "position"], registry=reg)
        for engine, counts in (("0", [5, 3]), ("1", [2, 0, 1])):
            for pos, n in enumerate(counts):
                per_pos.labels(engine, str(pos)).inc(n)
        h = Histogram("vllm:time_to_first_token_seconds", "t", ["engine"], buckets=[0.1, 1.0], registry=reg)
        for v in (0.05, 0.5, 5.0):
            h.labels("0").observe(v)
        got = sorted(snapshot.snapshot(reg), key=lambda m: (m.name, sorted(m.labels.items())))
        self.assertEqual(got, [
            snapshot.Counter("vllm:generation_tokens", {"engine": "1"}, 7),
            snapshot.Gauge("vllm:num_requests_running", {"engine": "0"}, 3.0),
            snapshot.Vector(snapshot.PER_POSITION, {"engine": "0"}, [5, 3, 0]),
            snapshot.Vector(snapshot.PER_POSITION, {"engine": "1"}, [2, 0, 1]),
            snapshot.Histogram("vllm:time_to_first_token_seconds", {"engine": "0"}, 3, 5.55,
                               {"0.1": 1, "1.0": 2, "+Inf": 3}),
        ])

    def test_one_object_per_series_of_the_vllm_page(self):
        reg = vllmpage.build(fixture(), populated=True, engines=3)
        text = generate_latest(reg).decode()
        want = 0
        for fam in vllmpage.text_string_to_metric_families(text):
            # the text format writes _created samples as gauges of their own
            if fam.name.startswith("vllm:") and not fam.name.endswith("_created"):
                suffix = {"gauge": "", "counter": "_total", "histogram": "_count"}[fam.type]
                want += sum(1 for s in fam.samples if s.name == fam.name + suffix)
        self.assertGreater(want, 100)
        self.assertEqual(len(snapshot.snapshot(reg)), want)


class ActorTest(unittest.TestCase):
    def test_query_adds_histogram_families(self):
        q = actor.vllmstat_query(["vllm:a_bucket", "vllm:b_total", "ray_vllm:c"])
        self.assertEqual(q, "name%5B%5D=vllm%3Aa_bucket&name%5B%5D=vllm%3Ab_total&name%5B%5D=vllm%3Aa")

    def test_runs_and_serves_prometheus_clients_page(self):
        sys.path.insert(0, os.path.join(actor.REPO, "clients", "python"))
        import vllmstat_client
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as names:
            names.write("\n".join(sorted(vllmstat_client._ASKED)))
            names.flush()
            p = subprocess.run([sys.executable, actor.__file__, "--names", names.name, "--engines", "1,2",
                                "--calls", "3", "--runs", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line.split(" | ") for line in p.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
        self.assertEqual(len(rows), 6, p.stdout)
        for prom, exposed in (rows[1:3], rows[4:6]):
            # prometheus_client's server sends the text; expose()'s page the values answer,
            # after a first answer with the layout
            text, values = int(prom[-1].strip(" |")), int(exposed[-1].strip(" |"))
            self.assertGreater(text, 1000)
            self.assertLess(values, text / 3)
        self.assertIn("The first answer's bytes (with the layout): vllmstat scrape: expose()'s page at 1 engines",
                      p.stdout)

    def test_compare_runs_both_clients_and_refuses_a_directory_without_one(self):
        sys.path.insert(0, os.path.join(actor.REPO, "clients", "python"))
        import vllmstat_client
        compare = os.path.join(os.path.dirname(actor.__file__), "compare.py")
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as names, tempfile.TemporaryDirectory() as empty:
            names.write("\n".join(sorted(vllmstat_client._ASKED)))
            names.flush()
            p = subprocess.run([sys.executable, compare, "--names", names.name, "--before", empty],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("--before: %s holds no vllmstat package" % empty, p.stderr)
            client = os.path.join(actor.REPO, "clients", "python")
            p = subprocess.run([sys.executable, compare, "--names", names.name, "--before", client, "--after", client,
                                "--engines", "1", "--calls", "3", "--reps", "2"],
                               capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line.split(" | ") for line in p.stdout.splitlines() if line.startswith("| 1 |")]
        self.assertEqual([r[1] for r in rows], ["idle", "busy"], p.stdout)
        for r in rows:
            self.assertGreater(int(r[-1].strip(" |").split("–")[0]), 1000)  # the page's bytes

    def test_render_compares_both_pages_and_refuses_a_directory_without_one(self):
        sys.path.insert(0, os.path.join(actor.REPO, "clients", "python"))
        import vllmstat_client
        render = os.path.join(os.path.dirname(actor.__file__), "render.py")
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as names, tempfile.TemporaryDirectory() as empty:
            names.write("\n".join(sorted(vllmstat_client._ASKED)))
            names.flush()
            p = subprocess.run([sys.executable, render, "--names", names.name, "--before", empty],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("--before: %s holds no vllmstat package" % empty, p.stderr)
            client = os.path.join(actor.REPO, "clients", "python")
            p = subprocess.run([sys.executable, render, "--names", names.name, "--before", client,
                                "--engines", "1", "--renders", "3"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line.split(" | ") for line in p.stdout.splitlines() if line.startswith("| idle") or line.startswith("| busy")]
        self.assertEqual([r[0] for r in rows], ["| idle", "| busy"], p.stdout)
        for r in rows:
            self.assertGreater(int(r[-1].strip(" |")), 1000)  # the page's bytes


class TrtllmTest(unittest.TestCase):
    def test_query_asks_for_the_namespaces_the_page_has(self):
        names = ["vllm:num_requests_running", "vllm:e2e_request_latency_seconds_bucket", "trtllm_prompt_tokens_total"]
        vllm_page = "# HELP x\nvllm:num_requests_running{engine=\"0\"} 1.0\n"
        self.assertEqual(trtllm.scraper_query(names, vllm_page),
                         "name%5B%5D=vllm%3Anum_requests_running&name%5B%5D=vllm%3Ae2e_request_latency_seconds_bucket"
                         "&name%5B%5D=vllm%3Ae2e_request_latency_seconds")
        self.assertEqual(trtllm.scraper_query(names[:2], "trtllm_prompt_tokens_total{a=\"b\"} 3.0\n"), "")

    def test_runs_and_prints_its_rows(self):
        sys.path.insert(0, os.path.join(actor.REPO, "clients", "python"))
        import vllmstat_client
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as names:
            names.write("\n".join(sorted(vllmstat_client._ASKED)))
            names.flush()
            p = subprocess.run([sys.executable, trtllm.__file__, "--names", names.name, "--calls", "5", "--runs", "1"],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("name[] for", p.stdout)  # vllmstat asks a TensorRT-LLM page for its names
        rows = [line.split(" | ") for line in p.stdout.splitlines() if line.startswith("| ") and "µs" not in line]
        self.assertEqual([r[0] for r in rows], ["| vllmstat scrape of expose()'s page, per scrape",
                                                "| per finished request (reader's thread, instrumented less not)",
                                                "| per drained iteration (drain thread)"], p.stdout)
        self.assertGreater(int(rows[0][-1].strip(" |")), 10000)  # the page's bytes


if __name__ == "__main__":
    unittest.main()
