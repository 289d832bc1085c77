"""What vllmstat.trtllm.instrument() costs an in-process TensorRT-LLM engine, in one Python
process: a vllmstat scrape of expose()'s page, each finished request and each drained
iteration.

    python3 trtllm.py --names FILE [--calls N] [--runs R]

TensorRT-LLM is not needed: the process runs instrument() on a stand-in engine, with the
stand-in tensorrt_llm.metrics module of clients/python/trtllm_test.py, whose MetricsCollector
declares and sets TensorRT-LLM's families as tensorrt_llm/metrics/collector.py does (the
declarations of internal/page/testdata/trtllm-render/trtllm_decl.py). The engine's own work
(generating, get_stats) is not measured.

- scrape: vllmstat's request (actor.py's scraper: its headers, a kept connection) for
  expose()'s page, with the query vllmstat sends: it reads the first page whole, then asks with
  name[] for the sample names of FILE in the namespaces that page had, or for the whole page
  again when it had none. CPU of this process's other threads (the page server's) per scrape,
  and of it the page's answer (holding the GIL). Idle: nothing changes; busy: before each
  scrape two requests finish (one stopped, one at its length: every histogram and counter of
  a request moves) and one iteration's statistics are drained (every gauge moves), waited for.
  Also how late a thread that sleeps 0.1 ms at a time wakes up during a scrape (actor.waits).
- request: the CPU a finished request costs the thread that reads it, instrumented
  (instrument()'s generate_async wrapper, its response handler and log_request_metrics_dict)
  less the same requests read from an engine that is not; per request.
- iteration: the CPU of instrument()'s drain thread per drained iteration, iterations queued
  10 at a time (the drain loop, the stand-in get_stats and log_iteration_stats).

Prints markdown.
"""

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import actor  # noqa: E402  (puts clients/python on the path)

sys.path.insert(0, os.path.join(actor.REPO, "clients", "python"))
sys.path.insert(0, os.path.join(actor.REPO, "internal", "page", "testdata", "trtllm-render"))
import trtllm_test  # noqa: E402

# The spellings of the namespaces vllmstat reads (internal/vllm: Namespaces of each engine).
NAMESPACES = ["vllm:", "vllm_", "ray_vllm_", "ray_vllm:", "sglang:", "sglang_", "ray_sglang_", "ray_sglang:",
              "trtllm_", "trtllm:"]

ITERS_PER_DRAIN = 10


def namespace(name):
    """The longest namespace spelling name begins with, or None."""
    best = None
    for p in NAMESPACES:
        if name.startswith(p) and (best is None or len(p) > len(best)):
            best = p
    return best


def scraper_query(names, page):
    """The query vllmstat sends once it has read page whole (internal/scrape/names.go): name[]
    for each name it reads in the namespaces page has names of, then each histogram's family;
    none (the whole page) when page has no name it reads."""
    on_page = {line.split("{")[0].split(" ")[0] for line in page.splitlines() if line and line[0] != "#"}
    spaces = {namespace(n) for n in names if n in on_page}
    asked = [n for n in names if namespace(n) in spaces]
    asked += [n[:-len("_bucket")] for n in asked if n.endswith("_bucket")]
    return urllib.parse.urlencode([("name[]", n) for n in asked])


class Engine:
    """A stand-in TensorRT-LLM LLM: generate_async returns a result that the final response
    finishes (trtllm_test.Handled), carrying one request's metrics; get_stats drains what was
    queued, waiting timeout for more as the engine's does."""

    def __init__(self):
        from tensorrt_llm.metrics import MetricNames

        class Args:
            return_perf_metrics = True
            enable_iter_perf_stats = True
            backend = "pytorch"
            model = "Qwen/Qwen3-8B"

        self.args = Args()
        self.names = MetricNames
        self.cond = threading.Condition()
        self.queued = []
        self.tick = 0

    def generate_async(self, inputs, sampling_params=None):
        m = self.names
        self.tick += 1
        t = 0.01 * (self.tick % 50 + 1)
        return trtllm_test.Handled(metrics_dict={
            "finished_reason": inputs, m.PROMPT_TOKENS: 100 + self.tick % 7, m.GENERATION_TOKENS: 20 + self.tick % 5,
            m.PROMPT_CACHE_CACHED_TOKENS: 64, m.TTFT: t, m.TPOT: t / 10, m.E2E: 10 * t, m.REQUEST_QUEUE_TIME: t / 2,
            m.PREFILL_TIME: t / 2, m.DECODE_TIME: 9 * t, m.INFERENCE_TIME: 9.5 * t})

    def get_stats(self, timeout=2):
        with self.cond:
            if not self.queued:
                self.cond.wait(timeout)
            out, self.queued = self.queued, []
        return out

    def queue(self, n):
        with self.cond:
            for _ in range(n):
                self.tick += 1
                k = self.tick
                self.queued.append({
                    "numActiveRequests": k % 64, "numQueuedRequests": k % 8, "maxNumActiveRequests": 64 + k % 2,
                    "gpuMemUsage": k, "cpuMemUsage": k, "pinnedMemUsage": k, "maxBatchSizeStatic": 64 + k % 2,
                    "maxBatchSizeRuntime": k % 64, "maxNumTokensRuntime": k, "numCompletedRequests": 1,
                    "iterLatencyMS": k % 100 + 1,
                    "kvCacheStats": {"maxNumBlocks": 1000 + k % 2, "freeNumBlocks": k % 500, "usedNumBlocks": 500 + k % 500,
                                     "tokensPerBlock": 32 + k % 2, "cacheHitRate": (k % 10) / 10, "reusedBlocks": k,
                                     "missedBlocks": k},
                    "inflightBatchingStats": {"numContextRequests": k % 4, "numGenRequests": k % 60,
                                              "numPausedRequests": k % 2, "numScheduledRequests": k % 64,
                                              "numCtxTokens": 100 + k % 1000, "avgNumDecodedTokensPerIter": k % 3 + 1},
                    "specDecodingStats": {"acceptanceLength": k % 3 + 1, "draftOverhead": k % 5 / 10,
                                          "numDraftTokens": 4, "numAcceptedTokens": 2}})
            self.cond.notify_all()


def finish(llm, reason):
    """A request read to its end, as a reader handles the engine's responses."""
    r = llm.generate_async(reason)
    r._handle_response(False)
    r._handle_response(True)
    return r


class Instrumented:
    """instrument() on a stand-in engine, its page served by actor.ExposeServer (expose()'s
    server, with the CPU of each answer kept)."""

    def __init__(self):
        import vllmstat.trtllm
        from prometheus_client import REGISTRY
        self.holds = []
        self.server = None

        def expose(*args, **kwargs):  # serves without registering with a vllmstat
            self.server = actor.ExposeServer(REGISTRY, self.holds)
            return self.server.exposure.url

        vllmstat.trtllm.expose = expose
        self.llm = Engine()
        self.url = vllmstat.trtllm.instrument(self.llm)
        self.collector = vllmstat.trtllm._state.collector
        self.wake = vllmstat.trtllm._state.wake
        self.drain = next(t for t in threading.enumerate() if t.name == "vllmstat-trtllm-stats")

    def change(self):
        """Two requests finish and one iteration is drained."""
        finish(self.llm, "stop")
        finish(self.llm, "length")
        before = self.collector.iterations_logged
        self.llm.queue(1)
        deadline = time.monotonic() + 30
        while self.collector.iterations_logged == before:
            if time.monotonic() > deadline:
                sys.exit("the drain thread did not log an iteration in 30 s")
            time.sleep(0.0002)


def scrape_cpu(inst, scraper, busy, n):
    """(CPU per scrape of the other threads, CPU of the page's answers per scrape)."""
    others, holds = 0.0, 0.0
    for _ in range(n):
        if busy:
            inst.change()
        del inst.holds[:]
        p0, t0 = time.process_time(), time.thread_time()
        scraper.scrape()
        others += (time.process_time() - p0) - (time.thread_time() - t0)
        holds += sum(inst.holds)
    return others / n, holds / n


def request_cpu(llm, n):
    """The CPU of this thread per request read to its end."""
    t0 = time.thread_time()
    for i in range(n):
        finish(llm, "stop" if i % 2 else "length")
    return (time.thread_time() - t0) / n


def iteration_cpu(inst, n):
    """The drain thread's CPU per drained iteration, ITERS_PER_DRAIN queued at a time."""
    clock = time.pthread_getcpuclockid(inst.drain.ident)
    total = 0.0
    for _ in range(max(1, n // ITERS_PER_DRAIN)):
        before = inst.collector.iterations_logged
        c0 = time.clock_gettime(clock)
        inst.llm.queue(ITERS_PER_DRAIN)
        inst.wake.set()  # as a finish does: the drain runs after one
        deadline = time.monotonic() + 30
        while inst.collector.iterations_logged < before + ITERS_PER_DRAIN:
            if time.monotonic() > deadline:
                sys.exit("the drain thread did not log the queued iterations in 30 s")
            time.sleep(0.001)
        total += time.clock_gettime(clock) - c0
    return total / (max(1, n // ITERS_PER_DRAIN) * ITERS_PER_DRAIN)


def measure(names, calls, runs):
    inst = Instrumented()
    plain = Engine()
    inst.change()  # every series present before the first page
    port = int(inst.url.split(":")[2].split("/")[0])
    page = urllib.request.urlopen(urllib.request.Request(inst.url, headers=actor.HEADERS), timeout=30).read().decode()
    for family in ("trtllm_e2e_request_latency_seconds_bucket", "trtllm_num_requests_running"):
        if family not in page:
            sys.exit(f"expose()'s page has no {family}: the collector did not record")
    query = scraper_query(names, page)
    scraper = actor.Scraper(port, "/metrics" + ("?" + query if query else ""))
    size = scraper.scrape()
    rows = {"scrape": {False: [], True: []}, "wait": {False: [], True: []}, "request": [], "iteration": []}
    for _ in range(runs):
        for busy in (False, True):
            for _ in range(3):
                scraper.scrape()
            rows["scrape"][busy].append(scrape_cpu(inst, scraper, busy, calls))
            rows["wait"][busy] += actor.waits(scraper.scrape, inst, busy, max(10, calls // 5))
        request_cpu(inst.llm, 20)
        request_cpu(plain, 20)
        rows["request"].append(request_cpu(inst.llm, calls * 5) - request_cpu(plain, calls * 5))
        rows["iteration"].append(iteration_cpu(inst, calls))
    scraper.close()
    inst.server.close()
    return query, size, rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--names", required=True, help="sample names vllmstat reads, one a line")
    p.add_argument("--calls", type=int, default=200, help="scrapes per case and run")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    with open(args.names, encoding="utf-8") as f:
        names = [ln.strip() for ln in f if ln.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        trtllm_test.write_standin(tmp)
        sys.path.insert(0, os.path.join(tmp, "standin"))
        query, size, rows = measure(names, args.calls, args.runs)

    def us(xs):
        return f"{statistics.median(xs) * 1e6:.0f}"

    print(f"## What vllmstat.trtllm.instrument() costs an in-process TensorRT-LLM engine, "
          f"{args.calls} scrapes x {args.runs} runs\n")
    asked = (f"name[] for {len(urllib.parse.parse_qs(query)['name[]'])} names" if query else
             "no name[]: the page has none of the names vllmstat asks for, so it reads the page whole")
    print(f"One process: instrument() on a stand-in engine (TensorRT-LLM's MetricsCollector as "
          f"tensorrt_llm/metrics/collector.py sets it) in prometheus_client's default registry; "
          f"the scrapes send vllmstat's request ({asked}). Median of the runs; busy: two requests "
          f"finish and one iteration is drained before each scrape.\n")
    print("| work | µs CPU, idle / busy | µs of it holding the GIL | another thread's longest wait per "
          "scrape, ms, idle / busy | page bytes |")
    print("|---|---:|---:|---:|---:|")
    sc = rows["scrape"]
    print(f"| vllmstat scrape of expose()'s page, per scrape | {us([c for c, _ in sc[False]])} / "
          f"{us([c for c, _ in sc[True]])} | {us([h for _, h in sc[False]])} / {us([h for _, h in sc[True]])} "
          f"| {actor.ms(rows['wait'][False])} / {actor.ms(rows['wait'][True])} | {size} |")
    print(f"| per finished request (reader's thread, instrumented less not) | {us(rows['request'])} | all | | |")
    print(f"| per drained iteration (drain thread) | {us(rows['iteration'])} | all | | |")
    print(f"\nMachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"prometheus_client {actor.prometheus_client_version()}, Python {sys.version.split()[0]}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
