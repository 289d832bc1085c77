"""The page that :func:`vllmstat.expose` serves: what it answers (prometheus_client's own
answer, or vllmstat's restricted request rendered from the metric objects' values) and the
HTTP server that answers it on kept-alive connections."""

from __future__ import annotations

import itertools
import operator
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

# A kept-alive connection to the page idle this long is closed (its thread ends).
_IDLE_TIMEOUT = 120.0

# vllmstat asks a page for only the samples it reads (name[] parameters), every 0.5-1 s.
# prometheus_client answers such a request by collecting every family asked for into Sample
# tuples and formatting sample after sample: about 1 ms for one engine and 8 ms for eight, all of
# it holding the GIL that the engine's own threads need. The page answers that one request from
# the metric objects' values instead, with the text prometheus_client would serve; every other
# request gets prometheus_client's own answer.

# The samples a vllmstat scrape asks a vLLM page for, in vLLM's spelling (internal/scrape's tests
# keep these lists equal to the name[] parameters it sends).
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
                     "request_max_num_generation_tokens", "request_prefill_time_seconds",
                     "request_decode_time_seconds", "request_inference_time_seconds", "iteration_tokens_total",
                     "kv_block_lifetime_seconds", "kv_block_idle_before_evict_seconds", "kv_block_reuse_gap_seconds")
_ASKED = frozenset(["vllm:" + g for g in _ASKED_GAUGES]
                   + ["vllm:" + c + s for c in _ASKED_COUNTERS for s in ("_total", "_created")]
                   + ["vllm:" + h + s for h in _ASKED_HISTOGRAMS
                      for s in ("", "_bucket", "_sum", "_count", "_created")])


class _Page:
    """What the page answers for one registry: prometheus_client's own answer (its WSGI app),
    except for vllmstat's restricted request on a single-process registry (_Restricted)."""

    def __init__(self, registry):
        import prometheus_client
        self._app = prometheus_client.make_wsgi_app(registry)
        self._restricted = _Restricted.of(registry)

    def answer(self, method, path, query, accept, accept_encoding):
        """Returns the status line, the headers and the body of the answer."""
        if self._restricted is not None and method == "GET" and path != "/favicon.ico":
            out = self._restricted.answer(query, accept, accept_encoding)
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

        body = b"".join(self._app(environ, start_response))
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

    def answer(self, query, accept, accept_encoding):
        """The answer to a request with this query string, or None for prometheus_client's."""
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
            body = self.render(q)
        except Exception:  # what prometheus_client would do is unknown here: let it answer
            self._broken = True
            return None
        headers = [("Content-Type", content_type)]
        if exposition.gzip_accepted(accept_encoding):
            import gzip
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, body

    def render(self, q):
        """The text prometheus_client renders for query q, as bytes."""
        registry = self._registry
        with registry._lock:
            found = tuple(map(registry._names_to_collectors.get, q.order))
            # collectors without names are in every restricted page (newer prometheus_client)
            nameless = tuple(getattr(registry, "_collectors_without_names", ()))
        return b"".join([self._part(q, c) for c in q.collectors(found, nameless)])

    def _part(self, q, collector):
        prom = self._prom
        t = q.templates.get(collector)
        if t is _GENERIC:
            return prom.render([collector], q.name_set)
        text = None if t is None else t.fill(collector, prom)
        if text is None:  # no template yet, or one the metric's children outgrew
            t = q.templates[collector] = _Template.make(collector, q.name_set, prom)
            text = None if t is _GENERIC else t.fill(collector, prom)
            if text is None:
                return prom.render([collector], q.name_set)
        return text


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
_CREATED = operator.attrgetter("_created")
_NEG_INF = float("-inf")
# a gauge given a function (set_function) has its own _child_samples
_HAS_FUNCTION = operator.methodcaller("__contains__", "_child_samples")


class _Template:
    """One metric's part of a restricted page: prometheus_client's text of it with every value
    left out ("%s"), and how to read those values from the metric's objects.

    It is made from prometheus_client's own rendering, and kept only if filling it with the
    values read gives that rendering exactly. The _created samples (the children's creation
    times) are written into it. It holds while the metric has the same children with the same
    creation times, and the same setting for _created samples; a gauge given a function
    (set_function) is rendered by prometheus_client. A counter's or histogram's fill that reads
    the values of the last fill reuses its text: an idle engine's page costs little more than
    reading its values.
    """

    def __init__(self, kind, kids, created, read, templates, counts, go_float):
        self.kind, self.kids, self.created = kind, kids, created
        self._read, self._go_float = read, go_float
        self._general, self._whole = templates
        self._counts = counts
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
            made = _Template._reader(kind, name, kids, prom.mutex_value)
            if made is None:
                return _GENERIC
            read, names = made
            asked = [i for i, n in enumerate(names) if n in name_set]
            if len(asked) < len(names):
                read = _then(read, _getter(asked))
            created = None
            if use_created and kind != "gauge" and name + "_created" in name_set:
                created = tuple(map(_CREATED, kids))
            values = read()
            text = prom.render([collector], name_set).decode("utf-8")
            segments = _segments(text)
            n = len(values)
            if segments is None or len(segments) != 1 + n + len(created or ()):
                continue
            # the _created samples are the last of the text: one per child, in the same order
            fixed = [go(c) for c in created or ()]
            counted = [j for j, i in enumerate(asked) if kind == "histogram" and not names[i].endswith("_sum")]
            counting = set(counted)

            def template(count_format):
                return segments[0] + "".join(
                    (fixed[i - n] if i >= n else count_format if i in counting else "%s") + s
                    for i, s in enumerate(segments[1:]))

            general = template("%s")
            if general % tuple(map(go, values)) != text:
                continue
            # cumulative counts are integers while each observation adds 1: "%d.0" writes one
            # below 1e6 as repr does, faster
            whole = template("%d.0") if counted else None
            return _Template(kind, kids, (use_created, created), read, (general, whole), _getter(counted), go)
        return _GENERIC

    @staticmethod
    def _reader(kind, name, kids, mutex):
        """(a function reading the values but _created as a tuple, the sample name of each value),
        in the order of prometheus_client's text; None when a child's values are not plain
        values."""
        if kind == "histogram":
            series = [(k._buckets, k._sum, k._upper_bounds[0] >= 0) for k in kids]
            if any(type(v) is not mutex for b, total, _ in series for v in [total, *b]):
                return None
            names = []
            for buckets, _, with_sum in series:
                names += [name + "_bucket"] * len(buckets) + [name + "_count"] + [name + "_sum"] * with_sum

            def read():
                out: List[float] = []
                for buckets, total, with_sum in series:
                    # cumulative counts, added in prometheus_client's order (from 0.0)
                    counts = itertools.accumulate(map(_VALUE, buckets), initial=0.0)
                    next(counts)
                    out += counts
                    out.append(out[-1])
                    if with_sum:
                        out.append(float(total._value))
                return tuple(out)

            return read, names
        objs = [k._value for k in kids]
        if any(type(v) is not mutex for v in objs):
            return None
        if kind == "gauge" and any(map(_HAS_FUNCTION, map(vars, kids))):
            return None  # set_function
        sample = name + "_total" if kind == "counter" else name
        return (lambda: tuple(map(float, map(_VALUE, objs)))), [sample] * len(kids)

    def fill(self, collector, prom):
        """The metric's text now, or None when the template no longer renders it."""
        use_created, created = self.created
        kids = self.kids
        if prom.metrics._use_created != use_created or _children(collector) != kids:
            return None
        if created is not None and tuple(map(_CREATED, kids)) != created:
            return None  # a counter reset (prometheus_client 0.21 and later)
        if self.kind == "gauge" and any(map(_HAS_FUNCTION, map(vars, kids))):
            return None  # set_function
        values = self._read()
        last = self._last
        # == takes -0.0 for 0.0: a gauge can be set to either, but the sums and counts of
        # counters and histograms start at 0.0 and only add, which never gives -0.0
        if values == last[0] and self.kind != "gauge":
            return last[1]
        text = None
        if values:
            total = sum(values)
            if total - total != 0.0 or max(values) >= 1e6:
                # NaN, infinities, or a value Go writes with an exponent (prometheus_client's
                # floatToGoString); any other float is Python's repr, which "%s" writes
                go = self._go_float
                text = self._general % tuple([v if _NEG_INF < v < 1e6 else go(v) for v in values])
            elif self._whole is not None and all(map(float.is_integer, self._counts(values))):
                text = self._whole % values
        if text is None:
            text = self._general % values
        out = text.encode("utf-8")
        self._last = (values, out)
        return out


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


def _then(f, g):
    return lambda: g(f())


def _segments(text):
    """text cut before and after each sample's value, with "%" written "%%"; None when a line is
    neither "# ..." nor "name{labels} value"."""
    out = []
    part = []
    for line in text.split("\n")[:-1]:
        line = line.replace("%", "%%")
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



# carries a few kilobytes of names), the number of headers, and a body that is read and dropped
# (a larger one closes the connection after the answer).
_MAX_LINE = 65536
_MAX_HEADERS = 100
_MAX_BODY = 65536
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_SERVER_ERROR = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _read_request(rfile):
    """Reads one request's line and headers: (method, target, version, headers by lower-case
    name), None at the end of the connection, or "bad" for what is not an HTTP/1.x request."""
    line = rfile.readline(_MAX_LINE + 1)
    if not line:
        return None
    parts = line.decode("iso-8859-1").split()
    if len(parts) != 3 or not line.endswith(b"\n") or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return "bad"
    headers: Dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        line = rfile.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):
            return parts[0], parts[1], parts[2], headers
        name, colon, value = line.decode("iso-8859-1").partition(":")
        if not colon or not line.endswith(b"\n") or name[:1].isspace() or name != name.rstrip():
            return "bad"  # the end of the connection, an overlong line, or not a header
        name, value = name.lower(), value.strip()
        headers[name] = headers[name] + ", " + value if name in headers else value
    return "bad"


def _keep_alive(version, headers):
    """Whether a connection goes on after this request (HTTP/1.1 unless the client closes it;
    HTTP/1.0 only when the client asks)."""
    tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


_last_date: Tuple[int, str] = (0, "")  # the second a Date header was last made for, and the header


def _date():
    global _last_date
    now = int(time.time())
    if _last_date[0] != now:
        import email.utils
        _last_date = (now, email.utils.formatdate(now, usegmt=True))
    return _last_date[1]


def _server_classes():
    import socketserver

    class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
        """Answers scrapes concurrently (a boundary scrape may overlap a regular one), each
        connection in a thread of its own.

        Connections are kept alive between requests: a scrape on a new connection costs the
        engine's process an accepted socket and a new thread, more CPU than rendering the page.
        Closing the server closes the kept connections too.
        """

        daemon_threads = True
        allow_reuse_address = True
        answer: Callable[[str, str, Dict[str, str]], Any]

        def __init__(self, *args):
            self._conns: set = set()
            self._conns_lock = threading.Lock()
            super().__init__(*args)

        def server_bind(self):
            socketserver.TCPServer.server_bind(self)
            host, port = self.server_address[:2]
            self.server_name, self.server_port = str(host), int(port)

        def process_request_thread(self, request, client_address):
            with self._conns_lock:
                self._conns.add(request)
            try:
                super().process_request_thread(request, client_address)
            finally:
                with self._conns_lock:
                    self._conns.discard(request)

        def server_close(self):
            super().server_close()
            with self._conns_lock:
                conns = list(self._conns)
            for conn in conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # the connection's thread reads the end and returns
                except OSError:
                    pass

    class Server6(Server):
        address_family = socket.AF_INET6

    class Handler(socketserver.StreamRequestHandler):
        """Answers the requests of one connection, one after another, until the client closes
        it or asks to, sends what is not an HTTP/1.x request, or stays idle for _IDLE_TIMEOUT.

        HTTP is read here rather than by http.server, whose header parsing (the email package)
        costs a scrape more than rendering a one-engine page.
        """

        disable_nagle_algorithm = True  # an answer goes out in one write
        timeout = _IDLE_TIMEOUT

        def handle(self):
            try:
                while self._answer_one():
                    pass
            except OSError:
                pass  # the client went away, or stayed idle too long

        def _answer_one(self):
            """Answers one request; returns whether the connection goes on."""
            request = _read_request(self.rfile)
            if request is None:
                return False
            if request == "bad":
                self.connection.sendall(_BAD_REQUEST)
                return False
            method, target, version, headers = request
            keep = _keep_alive(version, headers)
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                self.connection.sendall(_BAD_REQUEST)
                return False
            if "transfer-encoding" in headers or not 0 <= length <= _MAX_BODY:
                keep = False  # a body the page does not read: the connection cannot go on
            elif length:
                self.rfile.read(length)
            try:
                status, fields, body = self.server.answer(method, target, headers)  # type: ignore[attr-defined]
            except Exception:  # a collector that fails: said on stderr, as prometheus_client's server does
                import traceback
                traceback.print_exc()
                self.connection.sendall(_SERVER_ERROR)
                return False
            head = ["HTTP/1.1 " + status, "Date: " + _date()]
            head += ["%s: %s" % (k, v) for k, v in fields if k]  # prometheus_client answers /favicon.ico with ""
            head.append("Content-Length: %d" % len(body))
            if not keep:
                head.append("Connection: close")
            elif version == "HTTP/1.0":
                head.append("Connection: keep-alive")
            out = ("\r\n".join(head) + "\r\n\r\n").encode("iso-8859-1")
            self.connection.sendall(out if method == "HEAD" else out + body)
            return keep

    return Server, Server6, Handler


_Server, _Server6, _Handler = _server_classes()
