"""What one scrape costs a vLLM API server: the server CPU per /metrics request, full page or
restricted to the samples vllmstat reads (name[] parameters), gzip or identity.

    python3 bench.py --names FILE [--scrapes N] [--runs R] [--app asgi|wsgi] [--populated]

FILE lists the sample names vllmstat reads, one a line; the names in vLLM's own spelling
("vllm:...") are requested. The server (serve.py) runs in its own process; this process sends
the requests one after another on one connection and reads the server's CPU time (user +
system, /proc/PID/stat) before and after. Cases are interleaved run by run so that a change of
machine load touches them alike. Prints markdown.
"""

import argparse
import gzip
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vllmpage  # noqa: E402
from prometheus_client import generate_latest  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
FLEET_ENGINES, FLEET_HZ = 1000, 2


class Server:
    """serve.py in a child process."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "serve.py"), *args],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"serve.py {' '.join(args)}: no port line, got {line!r}")
        self.port = int(line.split()[1])

    def cpu(self):
        """User + system CPU seconds of the server process so far (all its threads)."""
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """Sequential GETs on one keep-alive connection (http.client reconnects by itself when a
    server closes after each response)."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path, gz):
        self.conn.request("GET", path, headers={"Accept-Encoding": "gzip" if gz else "identity"})
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path[:80]}: status {r.status}")
        return r, body

    def close(self):
        self.conn.close()

    def request_bytes(self, path, gz):
        """Bytes of the request as sent: request line, Host and Accept-Encoding."""
        enc = "gzip" if gz else "identity"
        return len(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                   f"Accept-Encoding: {enc}\r\n\r\n")


def response_bytes(r, body):
    head = len("HTTP/1.1 200 OK\r\n\r\n") + sum(len(k) + len(v) + 4 for k, v in r.getheaders())
    return head + len(body)


def page_text(r, body):
    if r.getheader("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    return body.decode()


def sample_names(text):
    return {name for name, _ in vllmpage.series(text)}


def query(names):
    return "/metrics?" + urllib.parse.urlencode([("name[]", n) for n in names])


def measure(server, client, path, gz, n):
    """Server CPU and wall time per request over n requests, after a short warm-up."""
    for _ in range(20):
        client.get(path, gz)
    c0, t0 = server.cpu(), time.perf_counter()
    for _ in range(n):
        client.get(path, gz)
    c1, t1 = server.cpu(), time.perf_counter()
    return (c1 - c0) / n, (t1 - t0) / n


def machine_busy():
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def in_process(fixture, names, populated, number=200, repeat=5):
    """Median CPU seconds per call of render and compress, in this process (CPU time, not wall
    time, so that other processes on the machine do not inflate it)."""
    reg = vllmpage.build(fixture, populated)
    full = generate_latest(reg)
    restricted = generate_latest(reg.restricted_registry(names))

    def t(fn):
        return statistics.median(timeit.repeat(fn, timer=time.process_time, number=number,
                                               repeat=repeat)) / number

    return {
        "render full": (t(lambda: generate_latest(reg)), len(full)),
        # As _bake_output does it: build the restricted registry, then render.
        "render restricted": (t(lambda: generate_latest(reg.restricted_registry(names))),
                              len(restricted)),
        "gzip.compress full (level 9, the default)": (t(lambda: gzip.compress(full)),
                                                       len(gzip.compress(full))),
        "gzip.compress restricted": (t(lambda: gzip.compress(restricted)),
                                     len(gzip.compress(restricted))),
    }


def check_shape(fixture, populated):
    want, got, missing, extra = vllmpage.compare(
        fixture, generate_latest(vllmpage.build(fixture)).decode())
    print(f"Registry check: the fixture has {len(want)} series; the generated registry renders "
          f"{len(got)}; missing {len(missing)}, extra {len(extra)}.")
    for m in missing[:10] + extra[:10]:
        print(f"  differs: {m}")
    if populated:
        n = len(vllmpage.series(generate_latest(vllmpage.build(fixture, True)).decode()))
        print(f"Populated shape (every per-engine series present, as a running vLLM has): "
              f"{n} series.")
    return not missing and not extra


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--names", required=True, help="sample names vllmstat reads, one a line")
    p.add_argument("--scrapes", type=int, default=500)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--app", choices=("asgi", "wsgi"), default="asgi")
    p.add_argument("--populated", action="store_true")
    p.add_argument("--fixture", default=vllmpage.DEFAULT_FIXTURE)
    args = p.parse_args()

    with open(args.fixture, encoding="utf-8") as f:
        fixture = f.read()
    with open(args.names, encoding="utf-8") as f:
        names = [ln.strip() for ln in f if ln.strip().startswith("vllm:")]
    if not names:
        sys.exit(f"{args.names}: no sample name starting with vllm:")

    shape = "populated" if args.populated else "fixture"
    print(f"## Scrape cost, {shape} shape, {args.app} server, {args.scrapes} scrapes x "
          f"{args.runs} runs\n")
    ok = check_shape(fixture, args.populated)

    serve_args = ["--app", args.app, "--fixture", args.fixture]
    if args.populated:
        serve_args.append("--populated")
    if args.app == "asgi":
        shipped_asgi_check(serve_args, names)
        serve_args.append("--asgi-query-fix")

    with Server(*serve_args) as server:
        client = Client(server.port)
        r, body = client.get("/metrics", False)
        full_names = sample_names(page_text(r, body))
        present = [n for n in names if n in full_names]
        cases = []
        # Asking only for the names the first full page showed shortens the request; its
        # identity variant adds nothing new, so it is left out to keep the run short.
        for label, path, encodings in (("full", "/metrics", (True, False)),
                                       ("restricted", query(names), (True, False)),
                                       ("restricted to names on the page", query(present),
                                        (True,))):
            for gz in encodings:
                r, body = client.get(path, gz)
                got = sample_names(page_text(r, body))
                want = full_names if label == "full" else full_names & set(names)
                if got != want or (r.getheader("Content-Encoding") == "gzip") != gz:
                    sys.exit(f"{label} gzip={gz}: the server answered other samples than asked "
                             f"({len(got)} names, {len(want)} expected)")
                cases.append({"case": f"{label} + {'gzip' if gz else 'identity'}", "path": path,
                              "gz": gz, "req": client.request_bytes(path, gz),
                              "resp": response_bytes(r, body), "body": len(body), "cpu": [],
                              "wall": []})
        print(f"Restricted request: {len(names)} names in the vllm: spelling, query string "
              f"{len(query(names)) - len('/metrics?')} bytes, accepted (200, exactly the asked "
              f"samples: {len(full_names & set(names))} names on this page). Restricted to the "
              f"{len(present)} names the full page has: {len(query(present)) - len('/metrics?')} "
              f"bytes.\n")

        load0, busy0 = os.getloadavg(), machine_busy()
        for _ in range(args.runs):
            for c in cases:
                cpu, wall = measure(server, client, c["path"], c["gz"], args.scrapes)
                c["cpu"].append(cpu)
                c["wall"].append(wall)
        load1, busy1 = os.getloadavg(), machine_busy()
        client.close()

    print_table(cases)
    print(f"\nServer CPU is counted in clock ticks: the resolution is "
          f"{1e6 / CLK_TCK / args.scrapes:.0f} µs per scrape.")
    busy = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    print(f"Machine: {os.cpu_count()} CPUs; load average {load0[0]:.2f} before, "
          f"{load1[0]:.2f} after; all CPUs {busy:.0%} busy during the measurement (this client "
          "and the server included).\n")

    print("In-process split (CPU time, median of 5 x 200 calls, this process):\n")
    print("| step | µs CPU per call | bytes out |")
    print("|---|---:|---:|")
    for k, (sec, size) in in_process(fixture, names, args.populated).items():
        print(f"| {k} | {sec * 1e6:.0f} | {size} |")

    if not args.populated:
        multiproc_check(args.app, names)
    return 0 if ok else 1


def print_table(cases):
    base = statistics.median(cases[0]["cpu"])
    print("| case | request bytes | response bytes | server CPU µs/scrape (median [min-max]) | "
          f"vs full + gzip | wall µs/scrape | fleet of {FLEET_ENGINES} at {FLEET_HZ} Hz: "
          "MB/s up / down |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rate = FLEET_ENGINES * FLEET_HZ / 1e6
    for c in cases:
        med = statistics.median(c["cpu"])
        print(f"| {c['case']} | {c['req']} | {c['resp']} | {med * 1e6:.0f} "
              f"[{min(c['cpu']) * 1e6:.0f}-{max(c['cpu']) * 1e6:.0f}] | {med / base:.2f} | "
              f"{statistics.median(c['wall']) * 1e6:.0f} | {c['req'] * rate:.2f} / "
              f"{c['resp'] * rate:.2f} |")


def shipped_asgi_check(serve_args, names):
    """This prometheus_client's ASGI app, as shipped: does it honour name[]?"""
    with Server(*serve_args) as server:
        client = Client(server.port)
        full = sample_names(page_text(*client.get("/metrics", False)))
        restricted = sample_names(page_text(*client.get(query(names), False)))
        client.close()
    verdict = ("ignores name[] and serves the full page" if restricted == full
               else f"serves {len(restricted)} of {len(full)} names")
    print(f"Shipped make_asgi_app of this prometheus_client: a name[] request {verdict}. "
          "The rows below serve it with the query string decoded, as fixed releases do.")


def multiproc_check(app, names):
    """vLLM with several API server processes: a registry holding only a
    MultiProcessCollector. What does a name[] request get?"""
    print("\nMultiprocess mode (PROMETHEUS_MULTIPROC_DIR set, registry = CollectorRegistry() "
          "holding only MultiProcessCollector):\n")
    with tempfile.TemporaryDirectory() as d:
        extra = ["--asgi-query-fix"] if app == "asgi" else []
        with Server("--app", app, "--multiproc", d, *extra) as server:
            client = Client(server.port)
            for label, path in (("full", "/metrics"), ("restricted", query(names))):
                for gz in (False, True):
                    r, body = client.get(path, gz)
                    text = page_text(r, body)
                    print(f"- {label} + {'gzip' if gz else 'identity'}: status {r.status}, "
                          f"{len(body)} body bytes, {len(text)} bytes of text, "
                          f"{len(vllmpage.series(text))} series")
            client.close()


if __name__ == "__main__":
    sys.exit(main())
