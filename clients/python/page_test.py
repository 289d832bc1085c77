"""Tests of the page expose() serves: every answer is the one prometheus_client's own WSGI app
gives for the same request (status, headers and body, byte for byte), in particular for
vllmstat's restricted request, which the page renders from the metric objects' values.

The registries hold vLLM-like families (counters with _created, gauges, histograms, labels that
need escaping) whose values change at random between requests; other cases add and remove
children and collectors, give a gauge a function, and hold collectors the page leaves to
prometheus_client. Multiprocess mode and PROMETHEUS_DISABLE_CREATED_SERIES run in child
processes (prometheus_client reads them when imported). The page server is tested over HTTP:
kept connections, HTTP/1.0, HEAD, and closing.

They need prometheus_client (Debian's python3-prometheus-client for /usr/bin/python3): without
it they skip with a message, and fail with CI=true.
Run: /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import gzip
import http.client
import math
import os
import random
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllmstat_client  # noqa: E402

try:
    import prometheus_client
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    prometheus_client = None

WAIT = 30.0
VLLMSTAT_ACCEPT = "text/plain;version=0.0.4;q=0.9,*/*;q=0.1"  # what vllmstat sends
ASKED = sorted(vllmstat_client._ASKED)
# vllmstat's query: every name it asks a vLLM page for
QUERY = urllib.parse.urlencode([("name[]", n) for n in ASKED])
ESCAPED = ['a\\b', 'say "hi"', 'two\nlines', '100%', '%s%d%%', 'é ü', '{x="y"}', ' ', '']


def need_prometheus_client():
    if prometheus_client is not None:
        return
    msg = "SKIPPED LOUDLY: prometheus_client is not importable in %s (run with /usr/bin/python3)" % sys.executable
    if os.environ.get("CI") == "true":
        raise AssertionError(msg + " (CI=true: failing instead of skipping)")
    sys.stderr.write("\n*** %s ***\n" % msg)
    raise unittest.SkipTest(msg)


def prometheus_answer(registry, query, accept=VLLMSTAT_ACCEPT, encoding="identity", method="GET", path="/metrics"):
    """What prometheus_client's WSGI app answers."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query}
    if accept is not None:
        environ["HTTP_ACCEPT"] = accept
    if encoding is not None:
        environ["HTTP_ACCEPT_ENCODING"] = encoding
    started = []
    body = b"".join(prometheus_client.make_wsgi_app(registry)(environ, lambda s, h, e=None: started.append((s, h))))
    return started[0][0], list(started[0][1]), body


def query_of(names):
    return urllib.parse.urlencode([("name[]", n) for n in names])


class Engines:
    """vLLM-like families for a few engines in a registry of their own, with values that change
    at random."""

    def __init__(self, registry, engines=3, rng=None):
        self.rng = rng or random.Random(1)
        labels = ["engine", "model_name"]
        self.counters = [
            Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=registry),
            Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=registry),
            Counter("vllm:request_success", "Count of successfully processed requests.",
                    labels + ["finished_reason"], registry=registry),
            Counter("vllm:num_preemptions", 'Cumulative number of preemption "from" the engine\\ 50%.',
                    labels, registry=registry),
        ]
        self.gauges = [
            Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                  registry=registry),
            Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
                  registry=registry),
            Gauge("vllm:engine_sleep_state", "Engine sleep state", labels + ["sleep_state"], registry=registry),
        ]
        self.histograms = [
            Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                      buckets=[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
                      registry=registry),
            Histogram("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens\ncomputed.", labels,
                      buckets=[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000], registry=registry),
            # a first bound below 0: prometheus_client writes no _sum
            Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency.", labels,
                      buckets=[-1.0, 0.01, 0.1, 1.0], registry=registry),
        ]
        for e in range(engines):
            model = ESCAPED[e % len(ESCAPED)]
            for c in self.counters[:2] + self.counters[3:]:
                c.labels(str(e), model)
            for reason in ("stop", "length", "abort"):
                self.counters[2].labels(str(e), model, reason)
            for g in self.gauges[:2]:
                g.labels(str(e), model)
            for state in ("awake", "weights_offloaded"):
                self.gauges[2].labels(str(e), model, state)
            for h in self.histograms:
                h.labels(str(e), model)

    def kids(self, metrics):
        return [k for m in metrics for k in m._metrics.values()]

    def change(self, big=False):
        """Changes some values at random: counts, fractions, values Go writes with an exponent,
        and for gauges NaN, infinities and -0.0."""
        r = self.rng
        for c in self.kids(self.counters):
            if r.random() < 0.6:
                c.inc(r.choice([1, 7, 0.5, 1e-7, 123456.789, 2e6 if big else 3]))
        for g in self.kids(self.gauges):
            if r.random() < 0.6:
                g.set(r.choice([0, 1, -2.5, 0.1 + 0.2, 1e-9, 1234567.0, 1e22, -3e7, math.nan, math.inf,
                                -math.inf, -0.0, r.random()]))
        for h in self.kids(self.histograms):
            for _ in range(r.randrange(3)):
                h.observe(r.choice([0.0, 0.003, 0.07, 3.0, 30.0, 700.0, -2.0, r.random() * 20000]))
            if big and r.random() < 0.3:
                h._buckets[r.randrange(len(h._buckets))].inc(1e6)


class PageCase(unittest.TestCase):
    def setUp(self):
        need_prometheus_client()
        self.registry = CollectorRegistry()
        self.engines = Engines(self.registry)
        self.page = vllmstat_client._Page(self.registry)

    def same(self, query, accept=VLLMSTAT_ACCEPT, encoding="identity", method="GET", path="/metrics"):
        """Asserts that the page answers as prometheus_client does; returns the body."""
        got = self.page.answer(method, path, query, accept, encoding)
        want = prometheus_answer(self.registry, query, accept, encoding, method, path)
        if encoding == "gzip" and want[2]:
            self.assertEqual(gzip.decompress(got[2]), gzip.decompress(want[2]))
            got, want = got[:2], want[:2]
        self.assertEqual(got, want)
        if self.page._restricted is not None:
            self.assertFalse(self.page._restricted._broken)
        return got[-1]

    def rendered_by_the_page(self, query=QUERY):
        """Whether the page rendered query itself (rather than prometheus_client)."""
        return query in self.page._restricted._queries


class RestrictedPage(PageCase):
    def test_vllmstats_query_as_values_change(self):
        self.assertGreater(len(self.same(QUERY)), 1000)
        for _ in range(150):
            self.engines.change()
            self.same(QUERY)
        self.assertTrue(self.rendered_by_the_page())

    def test_values_above_a_million_and_not_finite(self):
        for _ in range(60):
            self.engines.change(big=True)
            self.same(QUERY)
        body = self.same(QUERY).decode()
        self.assertRegex(body, r"vllm:prompt_tokens_total\{[^\n]*\} \d\.\d+e\+0\d\n")
        self.assertRegex(body, r"vllm:(request_prefill_kv_computed_tokens|time_to_first_token_seconds)_bucket"
                               r"\{[^\n]*\} \d(\.\d+)?e\+0\d\n")

    def test_subsets_of_the_names(self):
        rng = random.Random(2)
        subsets = [["vllm:time_to_first_token_seconds_count"], ["vllm:generation_tokens_created"],
                   ["vllm:time_to_first_token_seconds"], ["vllm:inter_token_latency_seconds_sum"],
                   ["vllm:request_success_total", "vllm:num_requests_running"],
                   ["vllm:num_requests_waiting"]]  # no such family here: an empty page
        subsets += [rng.sample(ASKED, rng.randrange(1, len(ASKED))) for _ in range(20)]
        for names in subsets:
            self.engines.change()
            q = query_of(names)
            self.same(q)
            self.engines.change()
            self.same(q)
            self.assertTrue(self.rendered_by_the_page(q), names)
        self.assertEqual(self.same(query_of(["vllm:num_requests_waiting"])), b"")

    def test_counts_that_are_not_whole_or_reach_a_million(self):
        # the page writes whole counts below 1e6 as integers, and any other count as
        # floatToGoString does: the boundary, fractions in a bucket, and a gauge's zeros
        hist = self.engines.histograms[0].labels("0", ESCAPED[0])
        bucket = hist._buckets[0]
        self.same(QUERY)
        bucket.inc(999999 - hist._buckets[0]._value - sum(b._value for b in hist._buckets[1:]))
        self.assertIn(" 999999.0\n", self.same(QUERY).decode())
        bucket.inc(1)
        self.assertIn(" 1e+06\n", self.same(QUERY).decode())
        bucket.inc(0.5)
        self.assertIn(" 1.0000005e+06\n", self.same(QUERY).decode())
        other = self.engines.histograms[1].labels("1", ESCAPED[1])
        other._buckets[2].inc(0.25)
        self.same(QUERY)
        running = self.engines.gauges[0]
        for child in running._metrics.values():
            child.set(5.0)  # no zero: every value of the family is a whole number
        tokens = self.engines.counters[0].labels("0", ESCAPED[0])
        for v in (3.0, 999999.0, 1e6, -3.0, -1e6, -9999999999999998.0, -1e16, 0.0, -0.0, 0.5):
            running.labels("0", ESCAPED[0]).set(v)
            self.assertIn(" %s\n" % prometheus_client.utils.floatToGoString(v), self.same(QUERY).decode())
        for total in (999999.0, 1e6):
            tokens.inc(total - tokens._value.get())
            self.assertIn(" %s\n" % prometheus_client.utils.floatToGoString(total), self.same(QUERY).decode())

    def test_bucket_values_set_directly(self):
        # observations only add whole numbers to buckets; values set on the objects themselves
        # (a negative one, whose children's counts go down, or an int) are written as
        # prometheus_client writes them all the same
        hist = self.engines.histograms[1].labels("2", ESCAPED[2])
        self.same(QUERY)
        hist._buckets[0].set(2e6)  # the first cumulative count is 2e+06 ...
        hist._buckets[1].set(-1.5e6)  # ... and the child's count 5e5
        self.assertIn(" 2e+06\n", self.same(QUERY).decode())
        hist._buckets[1].set(-2e6)
        self.same(QUERY)
        hist._buckets[0]._value = 3  # an int
        hist._buckets[1].set(0.0)
        self.same(QUERY)

    def test_values_are_written_as_prometheus_client_writes_them(self):
        # the page writes values itself: whole numbers as integers, the large ones with Go's
        # exponent, each as floatToGoString does
        go = prometheus_client.utils.floatToGoString
        rng = random.Random(3)
        values = [0.0, -0.0, 1.0, -1.0, 999999.0, 999999.5, 1e6, -1e6, 1000000.5, 1234500.0, 1e15, 1e16,
                  1.5e16, 2.0 ** 53, 2.0 ** 53 + 2, 1e22, 123456789012345678.0, 5e-324, 1e-7, 0.1 + 0.2,
                  1.7976931348623157e308, -1.7976931348623157e308, math.nan, math.inf, -math.inf, -1234567.0,
                  -1e16]
        for e in range(-30, 31):
            values += [rng.random() * 10.0 ** e, float(rng.randrange(10 ** max(e, 1))), -rng.random() * 10.0 ** e,
                       float(10 ** max(e, 0)), float(rng.randrange(10 ** max(e, 1))) * 10.0]
        self.assertEqual(vllmstat_client._float_texts(values, go), [go(v).encode() for v in values])
        for v in values:  # with others that are all written alike, or not
            for others in ([0.5, -3.0], [1.0, 2.0], []):
                self.assertEqual(vllmstat_client._float_texts(others + [v], go), [go(x).encode() for x in others + [v]])

    def test_the_same_values_give_the_same_text(self):
        first = self.same(QUERY)
        self.assertEqual(self.same(QUERY), first)
        self.engines.counters[0].labels("0", ESCAPED[0]).inc()
        self.assertNotEqual(self.same(QUERY), first)

    def test_children_come_and_go(self):
        self.same(QUERY)
        gen = self.engines.counters[0]
        gen.labels("9", "new").inc(5)
        self.same(QUERY)
        gen.remove("9", "new")
        self.same(QUERY)
        self.engines.histograms[0].labels("9", "new").observe(0.2)
        self.same(QUERY)
        gen.clear()
        self.same(QUERY)
        gen.labels("0", "back").inc(1)
        self.same(QUERY)

    def test_collectors_come_and_go(self):
        self.same(QUERY)
        late = Counter("vllm:mm_cache_hits", "Multi-modal cache hits.", ["engine"], registry=self.registry)
        late.labels("0").inc(3)
        self.same(QUERY)
        unlabelled = Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage.", registry=self.registry)
        unlabelled.set(0.25)
        self.same(QUERY)
        self.registry.unregister(self.engines.histograms[0])
        self.registry.unregister(late)
        self.same(QUERY)

    def test_a_gauge_with_a_function(self):
        self.same(QUERY)
        value = [2.5]
        self.engines.gauges[0].labels("1", ESCAPED[1]).set_function(lambda: value[0])
        for v in (2.5, -1.0, 7e9):
            value[0] = v
            self.assertIn(" %s\n" % prometheus_client.utils.floatToGoString(v), self.same(QUERY).decode())

    def test_collectors_the_page_leaves_to_prometheus_client(self):
        class Custom:
            def collect(self):
                g = GaugeMetricFamily("vllm:num_requests_waiting", "Waiting requests.", labels=["engine"])
                g.add_metric(["0"], 4.0)
                yield g

            def describe(self):
                yield GaugeMetricFamily("vllm:num_requests_waiting", "Waiting requests.")

        class MyCounter(Counter):
            pass

        self.registry.register(Custom())
        MyCounter("vllm:corrupted_requests", "Corrupted requests.", registry=self.registry).inc(2)
        Summary("vllm:request_queue_time_seconds", "Queue time.", registry=self.registry).observe(0.5)
        for _ in range(3):
            self.engines.change()
            body = self.same(QUERY).decode()
        self.assertIn('vllm:num_requests_waiting{engine="0"} 4.0', body)
        self.assertIn("vllm:corrupted_requests_total 2.0", body)
        self.assertIn("vllm:request_queue_time_seconds_count 1.0", body)

    def test_gzip(self):
        self.engines.change()
        self.same(QUERY, encoding="gzip")
        self.same(QUERY, encoding="gzip, deflate")


class OtherRequests(PageCase):
    """Requests that are not vllmstat's restricted request get prometheus_client's answer."""

    def test_full_page_and_names_not_all_vllmstats(self):
        self.engines.change()
        self.same("")
        self.same("", encoding="gzip")
        self.same(query_of(["vllm:generation_tokens_total", "process_cpu_seconds_total"]))
        self.same(query_of(["vllm:generation_tokens_total", "target_info"]))
        self.same("name%5B%5D=")
        self.same("other=1")
        self.assertEqual(self.page._restricted._queries, {})

    def test_openmetrics_and_other_methods(self):
        self.engines.change()
        self.same(QUERY, accept="application/openmetrics-text; version=0.0.1")
        self.same(QUERY, method="HEAD")
        self.same(QUERY, method="POST")
        self.same(QUERY, path="/favicon.ico")
        self.assertFalse(self.rendered_by_the_page())
        self.same(QUERY, accept=None, encoding=None)  # no Accept header: the text format
        self.assertTrue(self.rendered_by_the_page())


class ConcurrentScrapes(PageCase):
    def test_pages_rendered_at_once_while_values_change(self):
        # scrapes on two connections may render at once; every page holds the same series, and
        # the last one, with the values settled, is prometheus_client's
        want = text_string_to_metric_families
        series = {(s.name, tuple(sorted(s.labels.items()))) for f in want(self.same(QUERY).decode()) for s in f.samples}
        stop = threading.Event()
        bad = []

        def scrape():
            while not stop.is_set():
                body = self.page.answer("GET", "/metrics", QUERY, VLLMSTAT_ACCEPT, None)[2].decode()
                got = {(s.name, tuple(sorted(s.labels.items()))) for f in want(body) for s in f.samples}
                if got != series:
                    bad.append(got ^ series)

        threads = [threading.Thread(target=scrape) for _ in range(3)]
        for t in threads:
            t.start()
        for _ in range(300):
            self.engines.change()
        stop.set()
        for t in threads:
            t.join(WAIT)
        self.assertEqual(bad, [])
        self.same(QUERY)


CHILD = textwrap.dedent("""
    import gzip, re, sys, urllib.parse
    sys.path.insert(0, sys.argv[1])
    import vllmstat_client
    import prometheus_client
    from prometheus_client import Counter, Histogram
    c = Counter("vllm:generation_tokens", "Generation tokens.", ["engine"])
    h = Histogram("vllm:time_to_first_token_seconds", "TTFT.", ["engine"], buckets=[0.1, 1.0])
    for e in "01":
        c.labels(e).inc(5)
        h.labels(e).observe(0.5)
    registry = vllmstat_client._process_registry()
    page = vllmstat_client._Page(registry)
    query = urllib.parse.urlencode([("name[]", n) for n in sorted(vllmstat_client._ASKED)])
    for q in (query, ""):
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": q,
                   "HTTP_ACCEPT": "text/plain", "HTTP_ACCEPT_ENCODING": "identity"}
        started = []
        app = prometheus_client.make_wsgi_app(registry)
        want = b"".join(app(environ, lambda s, hs, e=None: started.append((s, hs))))
        got = page.answer("GET", "/metrics", q, "text/plain", "identity")
        # the process's own CPU time, memory and garbage collections move between two renders
        moving = re.compile(rb"^((?:process|python_gc)_\S+) .*$", re.M)
        assert got[:2] == (started[0][0], list(started[0][1])), (got, started)
        assert moving.sub(rb"\1 _", got[2]) == moving.sub(rb"\1 _", want), (got, want)
        print(len(want), "vllm:generation_tokens_total" in want.decode(), "_created" in want.decode())
    print("restricted by the page:", page._restricted is not None)
""")


class ChildProcess(unittest.TestCase):
    """Settings prometheus_client reads when imported, in a Python process of their own."""

    def run_child(self, env):
        need_prometheus_client()
        p = subprocess.run([sys.executable, "-c", CHILD, HERE], env=dict(os.environ, **env),
                           capture_output=True, text=True, timeout=WAIT)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout.splitlines()

    def test_multiprocess_mode_is_prometheus_clients(self):
        # the child checks that every answer is prometheus_client's; in multiprocess mode the
        # page leaves them all to it (0.16 answers name[] with an empty page: vllmstat sees it
        # and asks for full pages)
        with tempfile.TemporaryDirectory() as d:
            restricted, full, served = self.run_child({"PROMETHEUS_MULTIPROC_DIR": d})
        self.assertEqual(served, "restricted by the page: False")
        self.assertEqual(full.split()[1], "True")  # the full page has the engine's counts

    def test_created_series_disabled(self):
        restricted, full, served = self.run_child({"PROMETHEUS_DISABLE_CREATED_SERIES": "true"})
        self.assertEqual(served, "restricted by the page: True")
        self.assertEqual(restricted.split()[1:], ["True", "False"])  # no _created samples


class Served(unittest.TestCase):
    """The page over HTTP, as expose() serves it."""

    def setUp(self):
        need_prometheus_client()
        self.registry = CollectorRegistry()
        self.engines = Engines(self.registry, engines=2)
        self.exp = vllmstat_client._Exposure("127.0.0.1", "127.0.0.1", 0, self.registry)
        self.addCleanup(self.exp.close)
        self.port = self.exp._server.server_port

    def get(self, conn, query=QUERY, method="GET", headers=None):
        conn.request(method, "/metrics?" + query, headers=headers or {"Accept": VLLMSTAT_ACCEPT,
                                                                      "User-Agent": "vllmstat"})
        r = conn.getresponse()
        return r, r.read()

    def test_a_kept_connection_answers_scrape_after_scrape(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        self.addCleanup(conn.close)
        for _ in range(5):
            self.engines.change()
            r, body = self.get(conn)
            self.assertEqual(r.status, 200)
            self.assertEqual(body, prometheus_answer(self.registry, QUERY)[2])
            self.assertEqual(r.getheader("Content-Type"), prometheus_client.CONTENT_TYPE_LATEST)
            self.assertEqual(int(r.getheader("Content-Length")), len(body))
            self.assertFalse(r.will_close)
            sock = conn.sock
        self.get(conn)
        self.assertIs(conn.sock, sock)  # one connection throughout
        self.assertEqual(self.exp._answered, 6)

    def test_http10_head_and_a_request_with_a_body(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=WAIT) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            data = b"".join(iter(lambda: s.recv(65536), b""))  # the server closes after it
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertRegex(head, rb"^HTTP/1\.\d 200 ")
        self.assertEqual(body, prometheus_answer(self.registry, "")[2])

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        self.addCleanup(conn.close)
        r, body = self.get(conn, method="HEAD")
        self.assertEqual((r.status, body), (200, b""))
        self.assertEqual(int(r.getheader("Content-Length")), len(prometheus_answer(self.registry, QUERY)[2]))
        conn.request("GET", "/metrics", body=b"x=1", headers={"Content-Length": "3"})
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, prometheus_answer(self.registry, "")[2]))
        self.assertFalse(r.will_close)  # the body is read and left: the connection goes on
        self.assertEqual(self.get(conn)[0].status, 200)
        conn.request("GET", "/metrics", body=b"x" * 70000, headers={"Content-Length": "70000"})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        r.read()
        self.assertTrue(r.will_close)  # too large to read: the server closes

    def raw(self, data, timeout=WAIT):
        """Sends data on a new connection and reads until the server closes it ("reset" when it
        closes with some of the data unread, which may reset the connection)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            try:
                s.sendall(data)
                return b"".join(iter(lambda: s.recv(65536), b""))
            except ConnectionResetError:
                return b"reset"

    def test_connection_rules(self):
        page = prometheus_answer(self.registry, "")[2]
        # HTTP/1.1 asking to close; two requests sent at once, answered in order
        out = self.raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                       b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(out.count(b"HTTP/1.1 200 OK\r\n"), 2)
        self.assertTrue(out.endswith(page))
        self.assertIn(b"\r\nConnection: close\r\n", out)
        # HTTP/1.0 asking to keep the connection, then not
        out = self.raw(b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /metrics HTTP/1.0\r\n\r\n")
        self.assertEqual(out.count(b"\r\nContent-Length: %d\r\n" % len(page)), 2)
        self.assertIn(b"\r\nConnection: keep-alive\r\n", out)
        # what is not an HTTP/1.x request
        for bad in (b"GET /metrics\r\n\r\n", b"GET /metrics HTTP/2.0\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\n folded: header\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                    b"GET /" + b"x" * 70000 + b" HTTP/1.1\r\n\r\n"):
            out = self.raw(bad)
            self.assertTrue(out.startswith(b"HTTP/1.1 400 Bad Request\r\n") or out == b"reset", bad[:40])

    def test_an_idle_connection_is_closed(self):
        saved = vllmstat_client._Handler.timeout
        vllmstat_client._Handler.timeout = 0.2
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=WAIT) as s:
                self.assertEqual(s.recv(1), b"")  # the server closes it after 0.2 s
        finally:
            vllmstat_client._Handler.timeout = saved

    def test_closing_closes_kept_connections(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        self.addCleanup(conn.close)
        self.assertEqual(self.get(conn)[0].status, 200)
        self.exp.close()
        with self.assertRaises((ConnectionError, http.client.HTTPException, OSError)):
            self.get(conn)
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=WAIT).close()

    def test_a_failing_collector_answers_500(self):
        class Failing:
            def collect(self):
                raise RuntimeError("broken collector")

        self.registry.register(Failing())
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        self.addCleanup(conn.close)
        stderr = sys.stderr
        try:
            sys.stderr = open(os.devnull, "w")  # the server prints the traceback
            r, _ = self.get(conn, query="")
        finally:
            sys.stderr.close()
            sys.stderr = stderr
        self.assertEqual(r.status, 500)


if __name__ == "__main__":
    unittest.main()
