"""What a vllmstat scrape costs a vLLM engine that runs inside a Ray actor, beside what NeMo-RL's
own vLLM metrics logger costs it, in one Python process holding a vLLM 0.20 registry.

    python3 actor.py --names FILE [--engines 1,8] [--calls N] [--runs R]

FILE lists the sample names vllmstat reads, one a line; the scrapes ask for their "vllm:"
spellings and the family name of each histogram, as vllmstat's query does. For each number of
engines, this process fills prometheus_client's default registry with vLLM's families for that
many engines (vllmpage.py, every per-engine series present) and measures:

- snapshot: the work of vLLM's get_metrics_snapshot() (snapshot.py), which NeMo-RL's logger
  thread calls every 0.5 s: CPU per call;
- a vllmstat scrape of prometheus_client's own page server (its WSGI app under its threading
  wsgiref server, as start_http_server runs it: a connection and a thread per scrape) and of
  the page vllmstat.expose() serves, each by a child process that sends vllmstat's request
  (its query, headers and User-Agent, and X-Vllmstat-Layout: "none", then the layout id of the
  last answer, so that expose()'s page sends its values answer, the layout only the first time)
  and keeps the connection when the server does: this process's CPU per scrape, and the CPU of
  the page's answer in the server's thread (the render: Python code with no waits, run holding
  the GIL). Page bytes: the body of an answer after the first (for expose(), the values; the
  first answer, with the layout, is printed below the table).

CPU is read with time.process_time (all threads of this process): a snapshot's is the CPU of
the thread that calls it, a scrape's that of the other threads (the page server's) while the
calling thread waits for the scraper. Each case runs with the values left alone ("idle") and
with every sample changed before each call ("busy": every counter and gauge moves, every
histogram series gets an observation in its first bucket).

The GIL: while the calls run, a probe thread sleeps 0.1 ms again and again, and for each call
the longest it waited past its wake-up time is kept. That is how long an engine thread that
wants to run is held back by the call: a render holds the GIL throughout, until CPython makes
it let go after the switch interval (5 ms) when another thread waits. With nothing running the
probe still wakes late now and then (timer slack, other processes): that floor is printed too.
Prints markdown.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "python"))

import snapshot  # noqa: E402
import vllmpage  # noqa: E402

# vllmstat's request headers (internal/scrape): the text format, no compression (its default).
HEADERS = {"Accept": "text/plain;version=0.0.4;q=0.9,*/*;q=0.1", "Accept-Encoding": "identity",
           "User-Agent": "vllmstat"}


def vllmstat_query(names):
    """The query vllmstat sends a vLLM page: name[] for each "vllm:" sample name it reads, then
    for the family of each histogram (internal/scrape/names.go)."""
    vllm = [n for n in names if n.startswith("vllm:")]
    asked = vllm + [n[:-len("_bucket")] for n in vllm if n.endswith("_bucket")]
    return urllib.parse.urlencode([("name[]", n) for n in asked])


# -- the scraper (a child process) ---------------------------------------------------------------

def scrape_loop(port, path):
    """Reads a count per line on stdin, sends that many requests, answers "ok BYTES" (the last
    answer's body). Each request holds the layout id of the answer before it, as vllmstat's do:
    "none" at first, and after an answer without one (a text answer)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    layout = "none"
    for line in sys.stdin:
        size = 0
        for _ in range(int(line)):
            conn.request("GET", path, headers=dict(HEADERS, **{"X-Vllmstat-Layout": layout}))
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                sys.exit(f"GET: status {r.status}")
            layout = r.getheader("X-Vllmstat-Layout") or "none"
            size = len(body)
        print(f"ok {size}", flush=True)


class Scraper:
    def __init__(self, port, path):
        self.proc = subprocess.Popen([sys.executable, __file__, "--scrape", str(port), "--path", path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def scrape(self, n=1):
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line.startswith("ok "):
            raise RuntimeError(f"scraper: {line!r}")
        return int(line.split()[1])

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


# -- servers -------------------------------------------------------------------------------------

class PrometheusServer:
    """prometheus_client's WSGI app under its threading wsgiref server, as start_http_server
    runs it (HTTP/1.0: a connection and a thread per scrape)."""

    def __init__(self, registry, holds):
        from wsgiref.simple_server import make_server
        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler
        self.server = make_server("127.0.0.1", 0, timed(make_wsgi_app(registry), holds), ThreadingWSGIServer,
                                  handler_class=_SilentHandler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class ExposeServer:
    """expose()'s page server (without registering with a vllmstat)."""

    def __init__(self, registry, holds):
        from vllmstat import client
        self.exposure = client._Exposure("127.0.0.1", "127.0.0.1", 0, registry)
        self.exposure._server.answer = timed(self.exposure._server.answer, holds)
        self.port = int(self.exposure.url.split(":")[2].split("/")[0])

    def close(self):
        self.exposure.close()


def timed(f, holds):
    """f, adding the CPU each call takes in its thread to holds."""
    def call(*args):
        t0 = time.thread_time()
        try:
            return f(*args)
        finally:
            holds.append(time.thread_time() - t0)
    return call


LABELS = {"snapshot": "get_metrics_snapshot()'s walk (NeMo-RL's logger, every 0.5 s)",
          "prom": "vllmstat scrape: prometheus_client's page server",
          "expose": "vllmstat scrape: expose()'s page"}


# -- the engine's values -------------------------------------------------------------------------

class Engines:
    """vLLM's families for n engines in prometheus_client's default registry, and a way to change
    every sample of them."""

    def __init__(self, fixture, n):
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram
        before = set(REGISTRY._collector_to_names)
        vllmpage.build(fixture, populated=True, registry=REGISTRY, engines=n)
        self.registry = REGISTRY
        self.collectors = [c for c in REGISTRY._collector_to_names if c not in before]
        self.counters, self.gauges, self.histograms = [], [], []
        for c in self.collectors:
            kids = list(c._metrics.values()) if c._labelnames else [c]
            {Counter: self.counters, Gauge: self.gauges, Histogram: self.histograms}[type(c)].extend(kids)
        self.tick = 0

    def change(self):
        """Changes every sample: counters and gauges move, each histogram series observes a
        value of its first bucket."""
        self.tick += 1
        for c in self.counters:
            c.inc(1)
        for g in self.gauges:
            g.set(self.tick)
        for h in self.histograms:
            h.observe(h._upper_bounds[0])

    def close(self):
        for c in self.collectors:
            self.registry.unregister(c)


# -- measuring -----------------------------------------------------------------------------------

class Probe:
    """A thread that sleeps 0.1 ms again and again and keeps its longest lateness since asked."""

    def __init__(self):
        self._longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        clock, sleep = time.perf_counter, time.sleep
        while not self._stop.is_set():
            t0 = clock()
            sleep(0.0001)
            late = clock() - t0 - 0.0001
            if late > self._longest:
                self._longest = late

    def longest(self):
        """The longest lateness since the last call."""
        out, self._longest = self._longest, 0.0
        return out

    def stop(self):
        self._stop.set()
        self._thread.join()


def cpu_per_call(call, engines, busy, n, own, holds):
    """(CPU per call, CPU holding the GIL per call). CPU: of this thread inside the calls (own: a
    snapshot, all of it holding the GIL), or else of this process's other threads (the page
    server's, while this thread waits for the scraper), whose page answers add to holds."""
    p0, t0 = time.process_time(), time.thread_time()
    inside = 0.0
    del holds[:]
    for _ in range(n):
        if busy:
            engines.change()
        c0 = time.thread_time()
        call()
        inside += time.thread_time() - c0
    others = (time.process_time() - p0) - (time.thread_time() - t0)
    if own:
        return inside / n, inside / n
    return others / n, sum(holds) / n


def waits(call, engines, busy, n):
    """The probe's longest wait during each of n calls."""
    probe = Probe()
    out = []
    try:
        for _ in range(n):
            if busy:
                engines.change()
            time.sleep(0.002)  # the probe catches up with what came before
            probe.longest()
            call()
            time.sleep(0.002)  # ... and with the call's end
            out.append(probe.longest())
    finally:
        probe.stop()
    return out


def measure(fixture, n, query, calls, runs, works=tuple(LABELS)):
    """The rows for n engines: {work: {"size": page bytes, "first": the first answer's bytes,
    busy: {"cpu", "hold": [per run], "wait": [per call]}}}, for the works named."""
    engines = Engines(fixture, n)
    holds = []
    try:
        servers = {}
        if "prom" in works:
            servers["prom"] = PrometheusServer(engines.registry, holds)
        if "expose" in works:
            servers["expose"] = ExposeServer(engines.registry, holds)
        scrapers = {k: Scraper(s.port, "/metrics?" + query) for k, s in servers.items()}
        firsts = {k: s.scrape() for k, s in scrapers.items()}
        sizes = {k: s.scrape() for k, s in scrapers.items()}
        if "expose" in servers:
            check_same(engines, servers["expose"], query)
        cases = [("snapshot", lambda: snapshot.snapshot(engines.registry), True)] if "snapshot" in works else []
        cases += [(k, s.scrape, False) for k, s in scrapers.items()]
        rows = {}
        for _ in range(runs):
            for name, call, own in cases:
                row = rows.setdefault(name, {"size": sizes.get(name), "first": firsts.get(name)})
                for busy in (False, True):
                    for _ in range(3):  # warm-up
                        call()
                    r = row.setdefault(busy, {"cpu": [], "hold": [], "wait": []})
                    cpu, hold = cpu_per_call(call, engines, busy, calls, own, holds)
                    r["cpu"].append(cpu)
                    r["hold"].append(hold)
                    r["wait"] += waits(call, engines, busy, max(10, calls // 5))
        for s in scrapers.values():
            s.close()
        for s in servers.values():
            s.close()
        return rows
    finally:
        engines.close()


def check_same(engines, now, query):
    """The page server's restricted page is prometheus_client's, busy or not."""
    from prometheus_client import generate_latest
    page = now.exposure._page
    names = urllib.parse.parse_qs(query)["name[]"]
    for _ in range(2):
        _, _, body = page.answer("GET", "/metrics", query, HEADERS["Accept"], "identity")
        if body != generate_latest(engines.registry.restricted_registry(names)):
            sys.exit("the page differs from prometheus_client's restricted page")
        engines.change()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--names", help="sample names vllmstat reads, one a line")
    p.add_argument("--engines", default="1,8")
    p.add_argument("--calls", type=int, default=200, help="calls per case and run")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--fixture", default=os.path.join(REPO, vllmpage.DEFAULT_FIXTURE))
    p.add_argument("--works", default=",".join(LABELS), help="what to measure: " + ", ".join(LABELS))
    p.add_argument("--client", help="the directory holding the vllmstat package to measure "
                   "(default: this repository's clients/python)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON (compare.py reads them)")
    p.add_argument("--scrape", type=int, help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.scrape:
        scrape_loop(args.scrape, args.path)
        return 0
    if not args.names:
        p.error("--names is required")
    works = args.works.split(",")
    if not set(works) <= set(LABELS):
        p.error("--works: %r is none of %s" % (sorted(set(works) - set(LABELS)), ", ".join(LABELS)))
    if args.client:
        sys.path.insert(0, os.path.abspath(args.client))
    with open(args.names, encoding="utf-8") as f:
        query = vllmstat_query([ln.strip() for ln in f])
    with open(args.fixture, encoding="utf-8") as f:
        fixture = f.read()
    if args.json:
        out = {n: measure(fixture, int(n), query, args.calls, args.runs, works) for n in args.engines.split(",")}
        json.dump({n: {w: {"size": row["size"], **{("busy" if b else "idle"): row[b] for b in (False, True)}}
                       for w, row in rows.items()} for n, rows in out.items()}, sys.stdout)
        print()
        return 0

    print(f"## What a vllmstat scrape costs an engine in a Ray actor, {args.calls} calls x "
          f"{args.runs} runs\n")
    floor = waits(lambda: time.sleep(0.005), None, False, 50)
    print(f"One process, prometheus_client's default registry with vLLM 0.20's families (every "
          f"per-engine series); the scrapes send vllmstat's query ({len(query)} bytes). CPU: "
          f"median of the runs; idle: the values stay, busy: every sample changes before each "
          f"call. Wait: how late a thread that sleeps 0.1 ms at a time wakes up during a call, "
          f"median [90th percentile] over the calls; with nothing running {ms(floor)}.\n")
    print("| engines | work | µs CPU per call, idle / busy | µs of it holding the GIL | another "
          "thread's longest wait per call, ms, idle / busy | page bytes |")
    print("|---:|---|---:|---:|---:|---:|")
    firsts = []
    for n in (int(e) for e in args.engines.split(",")):
        for name, row in measure(fixture, n, query, args.calls, args.runs, works).items():
            cells = [" / ".join(f"{statistics.median(row[b][k]) * 1e6:.0f}" for b in (False, True))
                     for k in ("cpu", "hold")]
            cells.append(" / ".join(ms(row[b]["wait"]) for b in (False, True)))
            print(f"| {n} | {LABELS[name]} | {' | '.join(cells)} | {row['size'] or ''} |")
            if row["first"] != row["size"]:
                firsts.append(f"{LABELS[name]} at {n} engines, {row['first']}")
    if firsts:
        print("\nThe first answer's bytes (with the layout): " + "; ".join(firsts) + ".")
    print(f"\nMachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"prometheus_client {prometheus_client_version()}, Python {sys.version.split()[0]}; "
          f"switch interval {sys.getswitchinterval() * 1e3:.0f} ms.")
    return 0


def ms(waits):
    """Median [90th percentile] of waits, in ms."""
    w = sorted(waits)
    return f"{statistics.median(w) * 1e3:.2f} [{w[int(0.9 * (len(w) - 1))] * 1e3:.2f}]"


def prometheus_client_version():
    try:
        from importlib.metadata import version
        return version("prometheus_client")
    except Exception:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
