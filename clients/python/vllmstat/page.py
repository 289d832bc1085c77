"""The page that :func:`vllmstat.expose` serves: what it answers (prometheus_client's own
answer, or vllmstat's restricted request rendered from the metric objects' values, as text or as
the values answer). ``_http`` serves it on kept-alive connections."""

from __future__ import annotations

import array
import functools
import hashlib
import itertools
import json
import operator
import struct
import sys
import urllib.parse
from typing import Any, Dict, Optional

# vllmstat asks a page for only the samples it reads (name[] parameters), every 0.5-1 s.
# prometheus_client answers such a request by collecting every family asked for into Sample
# tuples and formatting sample after sample: about 1 ms for one engine and 8 ms for eight, all of
# it holding the GIL that the engine's own threads need. The page answers that one request from
# the metric objects' values instead, with the text prometheus_client would serve; every other
# request gets prometheus_client's own answer.
#
# vllmstat's request may carry X-Vllmstat-Layout (the layout id it holds, or "none"): then the
# page answers with the values answer (application/vnd.vllmstat.values) where every family of
# the page has a template: the page's layout (its text cut around the values, and where each
# value comes from) when vllmstat does not hold it, then the metric objects' raw values as
# float64, from which vllmstat rebuilds the same text. At 8 engines that is 17 KB instead of
# 233 KB, and no value formatted in Python (_Restricted.values has the format).

# The samples a vllmstat scrape asks a vLLM page for, in vLLM's spelling (internal/scrape's tests
# keep these lists equal to the name[] parameters it sends; a query asks for one engine's names).
_ASKED_GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "gpu_cache_usage_perc",
                 "num_requests_waiting_by_reason", "engine_sleep_state", "engine_sleep_resource_state",
                 "engine_fully_awake", "engine_pause_state", "rl_weight_update_active")
_ASKED_COUNTERS = ("prefix_cache_queries", "gpu_prefix_cache_queries", "prefix_cache_hits", "gpu_prefix_cache_hits",
                   "num_preemptions", "prompt_tokens", "generation_tokens", "request_success",
                   "external_prefix_cache_queries", "external_prefix_cache_hits", "mm_cache_queries", "mm_cache_hits",
                   "spec_decode_num_drafts", "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens",
                   "spec_decode_num_accepted_tokens_per_pos", "corrupted_requests", "prompt_tokens_by_source",
                   "recomputed_token_executions", "estimated_flops_per_gpu", "estimated_read_bytes_per_gpu",
                   "estimated_write_bytes_per_gpu")
_ASKED_HISTOGRAMS = ("time_to_first_token_seconds", "inter_token_latency_seconds", "time_per_output_token_seconds",
                     "e2e_request_latency_seconds", "request_queue_time_seconds",
                     "request_prefill_kv_computed_tokens", "request_prompt_tokens", "request_generation_tokens",
                     "request_max_num_generation_tokens", "request_params_max_tokens",
                     "request_prefill_time_seconds", "request_decode_time_seconds", "request_inference_time_seconds",
                     "iteration_tokens_total",
                     "kv_block_lifetime_seconds", "kv_block_idle_before_evict_seconds", "kv_block_reuse_gap_seconds")
# The same for a TensorRT-LLM engine's page (vllmstat.trtllm.instrument), in its spelling.
_TRTLLM_ASKED_GAUGES = ("num_requests_running", "num_requests_waiting", "num_paused_requests", "kv_cache_utilization")
_TRTLLM_ASKED_COUNTERS = ("prompt_tokens", "generation_tokens", "prompt_cached_tokens", "request_success",
                          "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens")
_TRTLLM_ASKED_HISTOGRAMS = ("time_to_first_token_seconds", "time_per_output_token_seconds",
                            "e2e_request_latency_seconds", "request_queue_time_seconds",
                            "request_prefill_time_seconds", "request_decode_time_seconds",
                            "request_inference_time_seconds")


def _asked(ns, gauges, counters, histograms):
    return ([ns + g for g in gauges]
            + [ns + c + s for c in counters for s in ("_total", "_created")]
            + [ns + h + s for h in histograms for s in ("", "_bucket", "_sum", "_count", "_created")])


_ASKED = frozenset(_asked("vllm:", _ASKED_GAUGES, _ASKED_COUNTERS, _ASKED_HISTOGRAMS)
                   + _asked("trtllm_", _TRTLLM_ASKED_GAUGES, _TRTLLM_ASKED_COUNTERS, _TRTLLM_ASKED_HISTOGRAMS))


class _Page:
    """What the page answers for one registry: prometheus_client's own answer (its WSGI app),
    except for vllmstat's restricted request on a single-process registry (_Restricted)."""

    def __init__(self, registry):
        import prometheus_client
        self._app = prometheus_client.make_wsgi_app(registry)
        self._restricted = _Restricted.of(registry)

    def answer(self, method, path, query, accept, accept_encoding, layout=None):
        """Returns the status line, the headers and the body of the answer."""
        status, headers, chunks = self.respond(method, path, query, accept, accept_encoding, layout)
        return status, headers, b"".join(chunks)

    def respond(self, method, path, query, accept, accept_encoding, layout=None):
        """Returns the status line, the headers and the body of the answer, the body as a list of
        bytes to send one after another: a restricted page comes in a part per family, which the
        server sends as they are. (At 8 engines the page is 220 KB: joining it, and copying it
        behind the headers, made two buffers that size anew for every scrape, which cost a busy
        scrape more than the rest of its sending.) layout: the request's X-Vllmstat-Layout
        header, None without one."""
        if self._restricted is not None and method == "GET" and path != "/favicon.ico":
            out = self._restricted.answer(query, accept, accept_encoding, layout)
            if out is not None:
                return out
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query}
        if accept is not None:
            environ["HTTP_ACCEPT"] = accept
        if accept_encoding is not None:
            environ["HTTP_ACCEPT_ENCODING"] = accept_encoding
        started = []

        def start_response(status, headers, exc_info=None):
            started.append((status, headers))

        body = list(self._app(environ, start_response))
        status, headers = started[0]
        return status, list(headers), body


class _Restricted:
    """vllmstat's restricted page, rendered from the metric objects' values.

    It answers a request whose name[] parameters are all among the names vllmstat asks for, in
    the text format, and leaves every other request to prometheus_client. It takes the families
    asked for in the order prometheus_client's restricted registry does (a set of collectors
    built the same way). A Counter, Gauge or Histogram of prometheus_client with plain values
    gets a _Template; any other collector is collected and rendered by prometheus_client, on
    every request. Renders may run at the same time (scrapes on two connections): what they
    share is replaced whole, never changed in place.

    A request with X-Vllmstat-Layout gets the values answer (values()) when every collector of
    the page has a template that reads it now, and the text otherwise.
    """

    def __init__(self, registry, prom):
        self._registry = registry
        self._prom = prom
        self._queries: Dict[str, _Query] = {}  # query string -> its names, collectors, templates
        self._broken = False

    @classmethod
    def of(cls, registry):
        """A _Restricted for registry, or None where prometheus_client's answer is kept.

        In multiprocess mode (PROMETHEUS_MULTIPROC_DIR) the values live in files that a
        MultiProcessCollector reads; that registry is served as prometheus_client serves it.
        """
        from prometheus_client import exposition, metrics, utils, values
        if values.ValueClass is not values.MutexValue:
            return None
        if not (hasattr(registry, "_names_to_collectors") and hasattr(registry, "_lock")):
            return None
        return cls(registry, _Prom(exposition, metrics, utils, values.MutexValue))

    def answer(self, query, accept, accept_encoding, layout=None):
        """The answer to a request with this query string (its body a list of bytes), or None for
        prometheus_client's. layout: the layout id the request holds ("none" for none), None for
        a request that takes only text."""
        if self._broken:
            return None
        exposition = self._prom.exposition
        encoder, content_type = exposition.choose_encoder(accept)
        if encoder is not exposition.generate_latest:
            return None  # OpenMetrics, or a text format with other escaping
        q = self._queries.get(query)
        if q is None:
            names = urllib.parse.parse_qs(query).get("name[]")
            if not names or not _ASKED.issuperset(names):
                return None
            if len(self._queries) >= 8:  # vllmstat sends one query; anything else is not kept long
                self._queries = {}
            q = self._queries[query] = _Query(names)
        try:
            if layout is not None:
                out = self.values(q, layout)
                if out is not None:
                    return out
            body = self.render(q)
        except Exception:  # what prometheus_client would do is unknown here: let it answer
            self._broken = True
            return None
        headers = [("Content-Type", content_type)]
        if exposition.gzip_accepted(accept_encoding):
            import gzip
            body = [gzip.compress(b"".join(body))]
            headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, body

    def render(self, q):
        """The text prometheus_client renders for query q, as a list of bytes."""
        out = []
        for c in self._collectors(q):
            t = self._template(q, c)
            out.append(t.text(t.read()) if t is not None else self._prom.render([c], q.name_set))
        return out

    def values(self, q, held):
        """The values answer for query q to a request holding layout id held, or None when a
        collector of the page has no template (prometheus_client renders it).

        Its body: the layout's length L (uint32, little-endian; 0 when held is the layout's id),
        the layout (L bytes of JSON: _Query.layout), then every template's raw values, as
        float64 little-endian. Never compressed: the values of one scrape are a few KB that
        compress badly, and compressing them would cost the engine more than sending them.
        """
        templates = []
        for c in self._collectors(q):
            t = self._template(q, c)
            if t is None:
                return None
            templates.append(t)
        layout, ident = q.layout(tuple(templates))
        values = array.array("d")
        for t in templates:
            values.fromlist(t.read())  # a third less CPU than array() of an iterator, at 8 engines
        if sys.byteorder == "big":
            values.byteswap()
        if held == ident:
            layout = b""
        headers = [("Content-Type", _VALUES_TYPE), ("X-Vllmstat-Layout", ident)]
        return "200 OK", headers, [struct.pack("<I", len(layout)), layout, values.tobytes()]

    def _collectors(self, q):
        """The collectors of q's page, in prometheus_client's order."""
        registry = self._registry
        with registry._lock:
            found = tuple(map(registry._names_to_collectors.get, q.order))
            # collectors without names are in every restricted page (newer prometheus_client)
            nameless = tuple(getattr(registry, "_collectors_without_names", ()))
        return q.collectors(found, nameless)

    def _template(self, q, collector):
        """collector's template, valid now, or None when prometheus_client renders it. A template
        the metric outgrew (new children, a counter reset) is made again."""
        t = q.templates.get(collector)
        if t is _GENERIC:
            return None
        prom = self._prom
        if t is None or not t.valid(collector, prom):
            t = q.templates[collector] = _Template.make(collector, q.name_set, prom)
            if t is _GENERIC or not t.valid(collector, prom):  # changed again since it was made
                return None
        return t


_VALUES_TYPE = "application/vnd.vllmstat.values"


class _Prom:
    """The parts of prometheus_client a restricted page uses."""

    def __init__(self, exposition, metrics, utils, mutex_value):
        self.exposition, self.metrics, self.mutex_value = exposition, metrics, mutex_value
        self.go_float = utils.floatToGoString
        self.kinds = {metrics.Counter: "counter", metrics.Gauge: "gauge", metrics.Histogram: "histogram"}

    def render(self, collectors, name_set):
        """prometheus_client's text of these collectors restricted to name_set."""
        restricted = []
        for c in collectors:
            for m in c.collect():
                r = m._restricted_metric(name_set)
                if r:
                    restricted.append(r)
        return self.exposition.generate_latest(_Collected(restricted))


class _Collected:
    def __init__(self, metrics):
        self._metrics = metrics

    def collect(self):
        return self._metrics


class _Query:
    """One name[] query: its set of names as prometheus_client builds it, the collectors it
    finds, and a template per collector."""

    def __init__(self, names):
        # RestrictedRegistry's set, made as prometheus_client makes it (a set of a set), so
        # that the collectors found come in its order
        self.name_set = set(set(names))
        self.order = tuple(self.name_set)
        self.templates: Dict[Any, Any] = {}
        self._found: Optional[tuple] = None
        self._layout: tuple = (None, b"", "")  # the templates, their layout and its id

    def layout(self, templates):
        """The layout of the values answer for these templates (a tuple, in the page's order),
        as JSON bytes, and its id: made again only when a template is another object.

        {"v": 1, "parts": [part, ...]}, a part per template (_Template.part). The id is the first
        32 hex digits of the layout's SHA-256: vllmstat sends it back, and gets the layout again
        only when it changed.
        """
        last = self._layout
        if last[0] != templates:
            data = json.dumps({"v": 1, "parts": [t.part for t in templates]}, ensure_ascii=False,
                              separators=(",", ":")).encode("utf-8")
            last = self._layout = (templates, data, hashlib.sha256(data).hexdigest()[:32])
        return last[1], last[2]

    def collectors(self, found, nameless):
        """The collectors of the page in prometheus_client's order, for the collectors found
        by name (in self.order, None where none) and the collectors without names."""
        last = self._found
        if last is not None and last[0] == found and last[1] == nameless:
            return last[2]
        cs = set(nameless)
        for c in found:
            if c is not None:
                cs.add(c)
        order = list(cs)
        self.templates = {c: t for c, t in self.templates.items() if c in cs}
        self._found = (found, nameless, order)
        return order


_VALUE = operator.attrgetter("_value")
_TRUNC = float.__trunc__  # int(v) for a float v, in half of int()'s instructions
_ADD_UP = functools.partial(itertools.accumulate, initial=0.0)
_ADD_UP_INTS = functools.partial(itertools.accumulate, initial=0)
_CREATED = operator.attrgetter("_created")
_INF = float("inf")
# a gauge given a function (set_function) has its own _child_samples
_HAS_FUNCTION = operator.methodcaller("__contains__", "_child_samples")


class _Template:
    """One metric's part of a restricted page: prometheus_client's text of it cut around its
    values, and how to read those values from the metric's objects.

    It is made from prometheus_client's own rendering, and kept only if filling it with the
    values read gives that rendering exactly. The _created samples (the children's creation
    times) are written into it. It holds (valid()) while the metric has the same children with
    the same creation times, and the same setting for _created samples; a gauge given a function
    (set_function) is rendered by prometheus_client. A scrape reads the raw values (read()) and
    writes the text (text()), or sends them as they are (the values answer, whose layout holds
    the template's part). A counter's or histogram's text for the values of the last one is the
    last text: an idle engine's page costs little more than reading its values.

    A page is mostly histogram buckets (at 8 engines, about 2,000 of vLLM's values, nearly all
    of them changing between scrapes of a busy engine), so what a fill costs per value is what
    a scrape costs. The template is bytes: its "%" formatting finds each value's place with
    memchr, where a str template looks at every character of the labels around it (half the
    instructions per value). Counts that are whole numbers below 1e6 (as observations make them,
    and as most counters of requests and tokens are) are written "%d.0", which is their repr;
    that needs no string made per value, and they are given to it as integers, which it writes
    in half the instructions of floats. A histogram's values are read in one pass over all its
    children's objects, and its buckets added up as integers. Other values are written one by
    one (_float_texts). Where a count is not a whole number, or is 1e6 or more
    (Go writes it with an exponent), every value of the metric is written one by one into the
    general template.
    """

    def __init__(self, kind, kids, created, reader, asked, segments, go_float):
        self.kind, self.kids, self.created = kind, kids, created
        self._use_created, self._created = created
        self._gauge = kind == "gauge"
        self._reader, self._go = reader, go_float
        self.read = reader.read  # the raw values: no lock taken, as prometheus_client's own reads
        # the values of the text, by their index among the values the reader returns
        slots = [reader.sources[i] for i in asked]
        self._pick = _getter(slots)
        # the values answer's part of the layout (_Query.layout): the text around the values,
        # where each value of the text comes from, and how the raw values are added up
        self.part = {"segments": segments, "slots": slots, "cuts": reader.cut_sizes, "raw": reader.raw}
        segments = [s.replace("%", "%%") for s in segments]
        self._general = "%s".join(segments).encode("utf-8")
        self._fast = "".join(itertools.chain.from_iterable(
            zip(segments, ["%d.0" if reader.counts(i) else "%s" for i in asked] + [""]))).encode("utf-8")
        self._last: tuple = (None, b"")

    @staticmethod
    def make(collector, name_set, prom):
        """A _Template for collector, or _GENERIC when prometheus_client must render it."""
        kind = prom.kinds.get(type(collector))
        if kind is None:
            return _GENERIC
        use_created = prom.metrics._use_created
        name = collector._name
        go = prom.go_float
        for _ in range(3):  # the engine may change a value between the two readings
            kids = _children(collector)
            reader = _reader(kind, name, kids, prom.mutex_value)
            if reader is None:
                return _GENERIC
            asked = [i for i, n in enumerate(reader.names) if n in name_set]
            created = None
            if use_created and kind != "gauge" and name + "_created" in name_set:
                created = tuple(map(_CREATED, kids))
            raw = reader.read()
            text = prom.render([collector], name_set).decode("utf-8")
            segments = _segments(text)
            n = len(asked)
            if segments is None or len(segments) != 1 + n + len(created or ()):
                continue
            # the _created samples are the last of the text, one per child in the same order:
            # written into the last piece
            segments[n:] = ["".join(itertools.chain.from_iterable(
                zip(segments[n:], [go(c) for c in created or ()] + [""])))]
            t = _Template(kind, kids, (use_created, created), reader, asked, segments, go)
            # both ways of writing the values: each must give prometheus_client's text
            want = text.encode("utf-8")
            if t._text(raw, True) == want and t._text(raw, False) == want:
                return t
        return _GENERIC

    def valid(self, collector, prom):
        """Whether the template still renders the metric: the same children, with the same
        creation times, and no gauge given a function since."""
        kids = self.kids
        if prom.metrics._use_created != self._use_created or _children(collector) != kids:
            return False
        created = self._created
        if created is not None and tuple(map(_CREATED, kids)) != created:
            return False  # a counter reset (prometheus_client 0.21 and later)
        return not (self._gauge and any(map(_HAS_FUNCTION, map(vars, kids))))  # set_function

    def text(self, raw):
        """The metric's text for the raw values read (read())."""
        last = self._last
        # == takes -0.0 for 0.0: a gauge can be set to either, but the sums and counts of
        # counters and histograms start at 0.0 and only add, which never gives -0.0
        if not self._gauge and raw == last[0]:
            return last[1]
        out = self._text(raw, True)
        self._last = (raw, out)
        return out

    def _text(self, raw, fast):
        """The text of the values read (raw), as bytes: with the fast template where the reader
        can fill it (and fast is true), else with the general one."""
        values = self._reader.fast(raw, self._go) if fast else None
        if values is not None:
            return self._fast % self._pick(values)
        return self._general % self._pick(_float_texts(self._reader.floats(raw), self._go))


def _float_texts(values, go):
    """The values (floats) as prometheus_client writes them (floatToGoString), as bytes.

    That is Python's repr, which for a whole number below 1e6 is "%d.0" (written in a tenth of
    the time), except that Go writes a positive value from 1e6 on with an exponent, the digits
    of Python's repr with the trailing zeros left out (1234500.0: 1.2345e+06; from 1e16 on
    Python's repr has an exponent itself), and writes NaN and the infinities its own way (go,
    prometheus_client's floatToGoString). 0.0 is not written "%d.0": -0.0 is "-0.0".
    """
    if values:
        total = sum(values)
        if total - total == 0.0 and max(values) < 1e6:  # none is NaN, infinite or 1e6 and more
            return list(map(str.encode, map(float.__repr__, values)))
    out = []
    for v in values:
        if -1e6 < v < 1e6:
            out.append(b"%d.0" % v if v and v.is_integer() else float.__repr__(v).encode())
        elif 1e6 <= v < _INF:
            s = float.__repr__(v)
            dot = s.find(".")
            if dot > 6:
                s = (s[0] + "." + s[1:dot] + s[dot + 1:]).rstrip("0.") + "e+0" + str(dot - 1)
            out.append(s.encode())
        else:  # NaN, infinities, and negative values, which Go writes as Python does
            out.append(go(v).encode())
    return out


class _Values:
    """A counter's or gauge's children's values: read as a list, in the text's order."""

    cut_sizes = None  # the values are the text's as they are: nothing to add up

    def __init__(self, objs, names, gauge):
        self._objs, self.names, self._gauge = objs, names, gauge
        self.sources = range(len(names))
        self.raw = len(objs)

    def read(self):
        return list(map(_VALUE, self._objs))

    def counts(self, i):
        """Whether value i of the text is written "%d.0" by the fast template: all of them."""
        return True

    def fast(self, raw, go):
        """The values as integers when each is a whole number below 1e6 and above -1e16 (as
        counts of requests and tokens are, but for the large ones), which Python and Go write as
        "%d.0" does; else None. A gauge's 0 may be -0.0, which "%d.0" does not write."""
        try:
            ints = list(map(_TRUNC, raw))
        except (ValueError, OverflowError, TypeError):  # NaN, infinities, not a float
            return None
        if ints != raw or not ints or max(ints) >= 1e6 or min(ints) <= -1e16 or (self._gauge and 0 in ints):
            return None
        return ints

    def floats(self, raw):
        return list(map(float, raw))


class _Buckets:
    """A histogram's children's values: read as every child's bucket values one after another,
    then the children's sums; written per child as the cumulative counts, the count, and the
    sum (none when the first bound is below 0, as prometheus_client writes it). A value's index
    (its source) is its place among the cumulative counts, each child's after a 0, followed by
    the sums."""

    def __init__(self, name, series):
        buckets = [list(b) for b, _, _ in series]  # each child's bucket values
        self._objs = [v for b in buckets for v in b] + [total for _, total, with_sum in series if with_sum]
        self._read_counts = sum(map(len, buckets))  # how many of the values read are buckets'
        self.cut_sizes = list(map(len, buckets))  # how many bucket values each child has
        self.raw = len(self._objs)
        self._cuts, self.names, self.sources, lasts = [], [], [], []
        start, read, sums = 0, 0, self._read_counts + len(buckets)
        for b, (_, _, with_sum) in zip(buckets, series):
            self._cuts.append(slice(read, read + len(b)))
            read += len(b)
            end = start + 1 + len(b)
            self.names += [name + "_bucket"] * len(b) + [name + "_count"]
            self.sources += list(range(start + 1, end)) + [end - 1]
            lasts.append(end - 1)
            if with_sum:
                self.names.append(name + "_sum")
                self.sources.append(sums)
                sums += 1
            start = end
        self._counted = start
        self._lasts = _getter(lasts)  # each child's count among the cumulative counts

    def read(self):
        """Every bucket's own value and every sum, in one pass over the objects."""
        return list(map(_VALUE, self._objs))

    def counts(self, i):
        """Whether value i of the text is a cumulative count (a bucket's or the count)."""
        return self.sources[i] < self._counted

    def fast(self, raw, go):
        """The values (by source) for the fast template, added up as integers: when every
        bucket's value is a whole number from 0 (as observations make them) and each child's
        count is below 1e6. Then every cumulative count is a whole number below 1e6, which
        prometheus_client's float additions give exactly and "%d.0" writes as Python and Go
        do; else None. (The template writes integers in half the instructions of floats,
        which converting them mostly spends: a busy histogram takes a few percent less CPU.)"""
        n = self._read_counts
        own = raw[:n]
        try:
            ints = list(map(_TRUNC, own))
        except (ValueError, OverflowError, TypeError):  # NaN, infinities, not a float
            return None
        if ints != own or (ints and min(ints) < 0):
            return None
        counts = list(itertools.chain.from_iterable(map(_ADD_UP_INTS, map(ints.__getitem__, self._cuts))))
        if counts and max(self._lasts(counts)) >= 1e6:
            return None
        return counts + _float_texts(list(map(float, raw[n:])), go) if n < len(raw) else counts

    def floats(self, raw):
        """Every value, by source, as floats: the cumulative counts added up from 0.0 as
        prometheus_client adds them."""
        n = self._read_counts
        counts = list(itertools.chain.from_iterable(map(_ADD_UP, map(raw.__getitem__, self._cuts))))
        return counts + list(map(float, raw[n:]))


def _reader(kind, name, kids, mutex):
    """How to read a metric's values, with the sample name of each in the text's order; None when
    a child's values are not plain values (the ones read in prometheus_client's order)."""
    if kind == "histogram":
        series = [(k._buckets, k._sum, k._upper_bounds[0] >= 0) for k in kids]
        if any(type(v) is not mutex for b, total, _ in series for v in [total, *b]):
            return None
        return _Buckets(name, series)
    objs = [k._value for k in kids]
    if any(type(v) is not mutex for v in objs):
        return None
    if kind == "gauge" and any(map(_HAS_FUNCTION, map(vars, kids))):
        return None  # set_function
    sample = name + "_total" if kind == "counter" else name
    return _Values(objs, [sample] * len(kids), kind == "gauge")


_GENERIC: Any = object()  # a collector that prometheus_client renders


def _children(metric):
    """A metric's children as prometheus_client collects them: itself when it has no labels."""
    if metric._labelnames and not metric._labelvalues:
        with metric._lock:
            return tuple(metric._metrics.values())
    return (metric,)


def _getter(indices):
    """A function returning a tuple of the items at indices of a sequence."""
    if len(indices) == 1:
        i = indices[0]
        return lambda values: (values[i],)
    if not indices:
        return lambda values: ()
    return operator.itemgetter(*indices)


def _segments(text):
    """text cut before and after each sample's value; None when a line is neither "# ..." nor
    "name{labels} value"."""
    out = []
    part = []
    for line in text.split("\n")[:-1]:
        if line.startswith("#"):
            part.append(line + "\n")
            continue
        cut = line.rfind(" ")
        if cut < 0:
            return None
        part.append(line[:cut + 1])
        out.append("".join(part))
        part = ["\n"]
    out.append("".join(part))
    return out
