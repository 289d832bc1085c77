"""Tests of the values answer of the page expose() serves: the answer to vllmstat's restricted
request with an X-Vllmstat-Layout header, the page's layout (when the request does not hold it)
and the metric objects' raw values as float64.

A reader written here from the format alone (framing, layout JSON, the derived values of each
part, the slots) rebuilds the text with prometheus_client's own floatToGoString, which must be
the text answer to the same request byte for byte, and prometheus_client's.

They need prometheus_client (Debian's python3-prometheus-client for /usr/bin/python3): without
it they skip with a message, and fail with CI=true.
Run: /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import hashlib
import http.client
import json
import struct
import time
import unittest

import page_test
from page_test import ESCAPED, QUERY, VLLMSTAT_ACCEPT, Engines, PageCase, need_prometheus_client, prometheus_answer

try:
    import prometheus_client
    from prometheus_client import Counter
except ImportError:
    prometheus_client = None

vllmstat_client = page_test.vllmstat_client
VALUES_TYPE = "application/vnd.vllmstat.values"


def decode(body, held=None):
    """The layout (JSON bytes, or held's when the body sends none) and the text an answer's body
    gives, read as the format says. held: the layout bytes the reader holds."""
    go = prometheus_client.utils.floatToGoString
    if len(body) < 4:
        raise AssertionError("body of %d bytes: no layout length" % len(body))
    (n,) = struct.unpack_from("<I", body)
    if n == 0:
        if held is None:
            raise AssertionError("no layout sent, none held")
        data = held
    else:
        data = body[4:4 + n]
        if len(data) != n:
            raise AssertionError("layout cut short")
    layout = json.loads(data.decode("utf-8"))
    if set(layout) != {"v", "parts"} or layout["v"] != 1:
        raise AssertionError("not a v1 layout: %r" % sorted(layout))
    rest = body[4 + n:]
    if len(rest) % 8:
        raise AssertionError("%d value bytes" % len(rest))
    values = struct.unpack("<%dd" % (len(rest) // 8), rest)
    if len(values) != sum(p["raw"] for p in layout["parts"]):
        raise AssertionError("%d values for a layout of %d" % (len(values), sum(p["raw"] for p in layout["parts"])))
    out, at = [], 0
    for part in layout["parts"]:
        if set(part) != {"segments", "slots", "cuts", "raw"}:
            raise AssertionError("part keys %r" % sorted(part))
        raw = values[at:at + part["raw"]]
        at += part["raw"]
        if part["cuts"] is None:
            derived = list(raw)
        else:  # each child's cumulative counts from 0.0, then the sums
            derived, i = [], 0
            for cut in part["cuts"]:
                total = 0.0
                derived.append(total)
                for v in raw[i:i + cut]:
                    total += v
                    derived.append(total)
                i += cut
            derived += raw[i:]
        segments, slots = part["segments"], part["slots"]
        if len(segments) != len(slots) + 1:
            raise AssertionError("%d segments for %d slots" % (len(segments), len(slots)))
        out.append(segments[0])
        for slot, segment in zip(slots, segments[1:]):
            out += [go(derived[slot]), segment]
    return data, "".join(out).encode("utf-8")


def layout_length(body):
    return struct.unpack_from("<I", body)[0]


class ValuesCase(PageCase):
    def values(self, held="none", query=QUERY, encoding="identity"):
        """The values answer to a request holding layout id held: (id, layout bytes, text)."""
        status, headers, body = self.page.answer("GET", "/metrics", query, VLLMSTAT_ACCEPT, encoding, held)
        self.assertEqual(status, "200 OK")
        self.assertEqual([k for k, _ in headers], ["Content-Type", "X-Vllmstat-Layout"])
        self.assertEqual(headers[0][1], VALUES_TYPE)
        ident = headers[1][1]
        data, text = decode(body, self.held.get(held))
        self.assertEqual(ident, hashlib.sha256(data).hexdigest()[:32])
        self.held[ident] = data
        # the same text as the text answer, and as prometheus_client's
        self.assertEqual(text, self.same(query))
        return ident, body, text

    def setUp(self):
        super().setUp()
        self.held = {}


class ValuesAnswer(ValuesCase):
    def test_rebuilds_the_text_idle_and_as_values_change(self):
        ident, body, text = self.values()
        self.assertGreater(layout_length(body), 1000)
        parts = json.loads(self.held[ident])["parts"]
        # a histogram whose first bound is below 0 has no _sum: its raw values are its buckets'
        negative = [p for p in parts if "vllm:inter_token_latency_seconds_count" in "".join(p["segments"])]
        self.assertEqual(len(negative), 1)
        self.assertEqual(negative[0]["raw"], sum(negative[0]["cuts"]))
        self.assertNotIn(b"vllm:inter_token_latency_seconds_sum", text)
        self.assertIn(b"vllm:time_to_first_token_seconds_sum", text)
        self.assertEqual(self.values()[0], ident)  # idle: the same id
        for i in range(60):
            self.engines.change(big=i % 3 == 0)
            self.assertEqual(self.values()[0], ident)  # values change, the layout does not
            self.values(ident)

    def test_raw_values_are_sent_as_they_are(self):
        # bucket values set directly (negative, an int) are sent as raw values and added up by
        # the reader as prometheus_client adds them
        hist = self.engines.histograms[1].labels("2", ESCAPED[2])
        hist._buckets[0].set(2e6)
        hist._buckets[1].set(-1.5e6)
        hist._buckets[2].set(0.1)
        hist._buckets[3].set(0.2)
        self.values()
        hist._buckets[0]._value = 3
        self.values()

    def test_subsets_of_the_names_and_an_empty_page(self):
        for names in (["vllm:time_to_first_token_seconds_count"], ["vllm:generation_tokens_created"],
                      ["vllm:inter_token_latency_seconds_sum"], ["vllm:request_success_total"],
                      ["vllm:num_requests_waiting"]):  # no such family here: an empty page
            self.engines.change()
            self.values(query=page_test.query_of(names))
        ident, body, text = self.values(query=page_test.query_of(["vllm:num_requests_waiting"]))
        self.assertEqual((json.loads(self.held[ident]), text), ({"v": 1, "parts": []}, b""))

    def test_the_held_layout_is_not_sent_again(self):
        ident, _, _ = self.values()
        n = sum(p["raw"] for p in json.loads(self.held[ident])["parts"])
        self.engines.change()
        again, body, text = self.values(ident)
        self.assertEqual(again, ident)
        self.assertEqual(layout_length(body), 0)
        self.assertEqual(len(body), 4 + 8 * n)
        # another id, or none, gets the layout
        self.assertGreater(layout_length(self.values("0" * 32)[1]), 0)
        self.assertGreater(layout_length(self.values("none")[1]), 0)

    def test_a_new_child_or_a_new_creation_time_changes_the_layout(self):
        ident, _, _ = self.values()
        self.engines.counters[0].labels("9", "new").inc(5)
        new, body, text = self.values(ident)
        self.assertNotEqual(new, ident)
        self.assertGreater(layout_length(body), 0)
        self.assertIn(b'engine="9"', text)
        self.assertEqual(layout_length(self.values(new)[1]), 0)
        # a counter reset gives a child a new creation time, written in the layout
        child = self.engines.counters[1].labels("0", ESCAPED[0])
        child._created = time.time() + 1000.0
        newer, body, _ = self.values(new)
        self.assertNotEqual(newer, new)
        self.assertGreater(layout_length(body), 0)
        # a child removed: the layout of before
        self.engines.counters[0].remove("9", "new")
        last, body, _ = self.values(newer)
        self.assertNotEqual(last, newer)
        self.assertGreater(layout_length(body), 0)

    def test_a_gauge_with_a_function_gets_the_text(self):
        ident, _, _ = self.values()
        self.engines.gauges[0].labels("1", ESCAPED[1]).set_function(lambda: 2.5)
        for held in ("none", ident):
            got = self.page.answer("GET", "/metrics", QUERY, VLLMSTAT_ACCEPT, "identity", held)
            self.assertEqual(got, prometheus_answer(self.registry, QUERY))
            self.assertEqual(dict(got[1])["Content-Type"], prometheus_client.CONTENT_TYPE_LATEST)

    def test_a_collector_prometheus_client_renders_gets_the_text(self):
        class MyCounter(Counter):
            pass

        MyCounter("vllm:corrupted_requests", "Corrupted requests.", registry=self.registry).inc(2)
        got = self.page.answer("GET", "/metrics", QUERY, VLLMSTAT_ACCEPT, "gzip", "none")
        want = prometheus_answer(self.registry, QUERY, encoding="gzip")
        self.assertEqual(got[:2], want[:2])
        self.assertEqual(dict(got[1])["Content-Encoding"], "gzip")

    def test_requests_without_the_header_get_the_text_as_before(self):
        # templates made for values answers fill the text answers too
        for _ in range(5):
            self.engines.change()
            ident = self.values()[0]
            self.same(QUERY)
            self.same(QUERY, encoding="gzip")
            self.values(ident)
        self.same("")  # the full page
        self.same(QUERY, accept="application/openmetrics-text; version=0.0.1")

    def test_other_requests_with_the_header_get_prometheus_clients_answer(self):
        self.engines.change()
        for query, accept in (("", VLLMSTAT_ACCEPT), (QUERY, "application/openmetrics-text; version=0.0.1"),
                              (page_test.query_of(["vllm:generation_tokens_total", "target_info"]), VLLMSTAT_ACCEPT)):
            got = self.page.answer("GET", "/metrics", query, accept, "identity", "none")
            self.assertEqual(got, prometheus_answer(self.registry, query, accept))


class ServedValues(unittest.TestCase):
    """The values answer over HTTP, as expose() serves it."""

    def setUp(self):
        need_prometheus_client()
        self.registry = prometheus_client.CollectorRegistry()
        self.engines = Engines(self.registry, engines=2)
        self.exp = vllmstat_client._Exposure("127.0.0.1", "127.0.0.1", 0, self.registry)
        self.addCleanup(self.exp.close)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.exp._server.server_port, timeout=page_test.WAIT)
        self.addCleanup(self.conn.close)

    def get(self, headers):
        self.conn.request("GET", "/metrics?" + QUERY, headers=dict(
            {"Accept": VLLMSTAT_ACCEPT, "Accept-Encoding": "gzip", "User-Agent": "vllmstat"}, **headers))
        r = self.conn.getresponse()
        return r, r.read()

    def test_a_values_request_over_http(self):
        r, body = self.get({"X-Vllmstat-Layout": "none"})
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Type"), VALUES_TYPE)
        self.assertIsNone(r.getheader("Content-Encoding"))  # gzip accepted, not used
        self.assertEqual(int(r.getheader("Content-Length")), len(body))
        data, text = decode(body)
        ident = r.getheader("X-Vllmstat-Layout")
        self.assertEqual(ident, hashlib.sha256(data).hexdigest()[:32])
        self.assertEqual(text, prometheus_answer(self.registry, QUERY)[2])
        self.engines.change()
        r, body = self.get({"X-Vllmstat-Layout": ident})
        self.assertEqual((r.getheader("Content-Type"), r.getheader("X-Vllmstat-Layout")), (VALUES_TYPE, ident))
        self.assertEqual(layout_length(body), 0)
        self.assertEqual(decode(body, data)[1], prometheus_answer(self.registry, QUERY)[2])
        # without the header, on the same connection: the text, gzipped as asked
        r, body = self.get({})
        self.assertEqual(r.getheader("Content-Type"), prometheus_client.CONTENT_TYPE_LATEST)
        self.assertEqual(r.getheader("Content-Encoding"), "gzip")
        self.assertIsNone(r.getheader("X-Vllmstat-Layout"))
        import gzip
        self.assertEqual(gzip.decompress(body), prometheus_answer(self.registry, QUERY)[2])
        self.assertEqual(self.exp._answered, 3)


if __name__ == "__main__":
    unittest.main()
