"""Tests of vllmstat.trtllm.instrument(): an in-process TensorRT-LLM engine's statistics, recorded
as trtllm-serve records them, served and read by a real vllmstat.

TensorRT-LLM is not installed here, so the engine process runs with two stand-ins written below:
a ``tensorrt_llm.metrics`` module whose ``MetricsCollector`` declares and sets TensorRT-LLM's
families through the declarations restated in internal/page/testdata/trtllm-render/trtllm_decl.py
(names, types, labels, which call moves which series), and an engine object with the surface that
instrument() uses: ``generate_async`` returning a result read as TensorRT-LLM's
``GenerationResult`` is (every reader handles each engine response through the result's
``_handle_response``; the last one marks it finished and carries its per-request metrics, one
dict per candidate when there are several), ``get_stats(timeout)`` draining queued iteration
statistics until none came for the timeout, and ``args`` with ``return_perf_metrics``,
``enable_iter_perf_stats``, ``backend`` and ``model``.

End to end: a real `vllmstat run` with no targets; the engine process calls instrument(), which
exposes the page and registers it; the test makes the process run batches of requests (read by
await, by result() and by streaming), ends steps through the Client and checks that each step's
``trtllm/`` keys equal what that step's requests and iterations produced.

Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from inprocess_test import CHILD_PY, WAIT, Lines, Vllmstat, need, scraped_ok, wait_for  # noqa: E402
from vllmstat_client import Client  # noqa: E402
import vllmstat.trtllm  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DECL = os.path.join(REPO, "internal", "page", "testdata", "trtllm-render")

# tensorrt_llm/metrics: MetricsCollector(labels) with log_request_metrics_dict and
# log_iteration_stats, set through trtllm_decl's restatement of TensorRT-LLM's declarations. The
# per-request dict's keys are MetricNames members and "finished_reason", as TensorRT-LLM's
# results carry them. It counts its calls, so that the process can tell when a drain has logged.
STANDIN_METRICS = r'''
import enum
import threading
import trtllm_decl


class MetricNames(enum.Enum):
    TTFT = "ttft"
    TPOT = "tpot"
    E2E = "e2e"
    REQUEST_QUEUE_TIME = "request_queue_time"
    PREFILL_TIME = "prefill_time"
    DECODE_TIME = "decode_time"
    INFERENCE_TIME = "inference_time"
    PROMPT_TOKENS = "prompt_tokens"
    GENERATION_TOKENS = "generation_tokens"
    PROMPT_CACHE_CACHED_TOKENS = "prompt_cache_cached_tokens"


class MetricsCollector:
    labelname_finish_reason = "finished_reason"
    made = 0

    def __init__(self, labels):
        MetricsCollector.made += 1
        self._c = trtllm_decl.Collector(labels)
        self.lock = threading.Lock()
        self.requests_logged = 0
        self.iterations_logged = 0

    def log_request_metrics_dict(self, d):
        reason = d.get(self.labelname_finish_reason)
        if reason:
            g = lambda name: d.get(MetricNames[name], 0)
            self._c.finished(reason, g("PROMPT_TOKENS"), g("GENERATION_TOKENS"), g("PROMPT_CACHE_CACHED_TOKENS"),
                             g("E2E"), g("TTFT"), g("TPOT"), g("REQUEST_QUEUE_TIME"), g("PREFILL_TIME"),
                             g("DECODE_TIME"), g("INFERENCE_TIME"))
        with self.lock:
            self.requests_logged += 1

    def log_iteration_stats(self, stats):
        self._c.iteration(stats)
        with self.lock:
            self.iterations_logged += 1
'''

# The engine process: a stand-in LLM, instrument(), and batches on the test's commands.
CHILD = r'''
import asyncio, json, queue, sys, time
import vllmstat.trtllm
from tensorrt_llm.metrics import MetricNames

WAIT = 20.0  # below the test's own deadline of 30 s


class Args:
    return_perf_metrics = True
    enable_iter_perf_stats = True
    backend = "pytorch"
    model = "Qwen/Qwen3-8B"


class Result:
    """A request's result as TensorRT-LLM's GenerationResult is read: the engine's responses
    wait on a queue, and each reader handles them through _handle_response."""

    def __init__(self):
        self.queue = queue.Queue()
        self._done = False
        self.metrics_dict = {}
        self.candidate_metrics = []

    @property
    def finished(self):
        return self._done

    def _handle_response(self, resp):
        self._done = resp["final"]
        if self._done:
            if len(resp["metrics"]) > 1:
                self.candidate_metrics = resp["metrics"]
            self.metrics_dict = resp["metrics"][-1]

    def result(self):
        while not self._done:
            self._handle_response(self.queue.get(timeout=WAIT))
        return self

    async def _aresult_step(self):
        resp = await asyncio.get_running_loop().run_in_executor(None, self.queue.get, True, WAIT)
        self._handle_response(resp)

    async def aresult(self):
        while not self._done:
            await self._aresult_step()
        return self

    def __await__(self):
        return self.aresult().__await__()

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._done:
            raise StopAsyncIteration
        await self._aresult_step()
        return self


class LLM:
    def __init__(self):
        self.args = Args()
        self.stats = queue.Queue()

    def generate_async(self, inputs, sampling_params=None, streaming=False):
        r = Result()
        for _ in range(inputs["chunks"] - 1):
            r.queue.put({"final": False})
        metrics = []
        for c in inputs["candidates"]:
            metrics.append({"finished_reason": c["reason"],
                            MetricNames.PROMPT_TOKENS: inputs["prompt"],
                            MetricNames.GENERATION_TOKENS: c["gen"],
                            MetricNames.PROMPT_CACHE_CACHED_TOKENS: inputs["cached"],
                            MetricNames.TTFT: c["ttft"], MetricNames.E2E: c["e2e"],
                            MetricNames.REQUEST_QUEUE_TIME: 0.0})
        r.queue.put({"final": True, "metrics": metrics})
        return r

    def get_stats(self, timeout=2):
        out = []
        while True:
            try:
                out.append(self.stats.get(timeout=timeout))
            except queue.Empty:
                return out


llm = LLM()
url = vllmstat.trtllm.instrument(llm, vllmstat=sys.argv[1])
collector = vllmstat.trtllm._state.collector
pushed = 0
print("url", url, flush=True)


async def read(mode, reqs):
    results = [llm.generate_async(inputs=r) for r in reqs]
    if mode == "await":  # as NeMo-RL's worker: asyncio.gather of awaited results
        await asyncio.gather(*results)
    elif mode == "stream":
        for r in results:
            async for _ in r:
                pass
    else:
        for r in results:
            r.result()
    # read again once finished: nothing more is counted
    for r in results:
        await r
        r.result()


for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "batch":
        b = json.loads(arg)
        for it in b["iters"]:
            llm.stats.put(json.dumps(it) if b.get("text") else it)
            pushed += 1
        asyncio.run(read(b["read"], b["requests"]))
        deadline = time.monotonic() + WAIT
        while collector.iterations_logged < pushed and time.monotonic() < deadline:
            time.sleep(0.01)
        print("ok", collector.requests_logged, collector.iterations_logged, flush=True)
    elif cmd == "exit":
        sys.exit(0)
'''


def request(prompt, cached, *candidates, chunks=3):
    """A request; each candidate (reason, generated tokens, ttft, e2e)."""
    return {"prompt": prompt, "cached": cached, "chunks": chunks,
            "candidates": [{"reason": r, "gen": g, "ttft": t, "e2e": e} for r, g, t, e in candidates]}


def iteration(running, waiting, used, total):
    return {"numActiveRequests": running, "numQueuedRequests": waiting,
            "kvCacheStats": {"usedNumBlocks": used, "maxNumBlocks": total, "freeNumBlocks": total - used}}


def write_standin(tmp):
    """Writes the stand-in tensorrt_llm package under tmp/standin."""
    pkg = os.path.join(tmp, "standin", "tensorrt_llm")
    os.makedirs(os.path.join(pkg, "metrics"))
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("")
    with open(os.path.join(pkg, "metrics", "__init__.py"), "w") as f:
        f.write(STANDIN_METRICS)


class Engine:
    """The engine process."""

    def __init__(self, tmp, vllmstat_url):
        env = dict(os.environ)
        env.pop("VLLMSTAT_API_TOKEN", None)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        env["PYTHONPATH"] = os.pathsep.join([HERE, os.path.join(tmp, "standin"), DECL])
        env["PYTHONWARNINGS"] = "default"
        self.proc = subprocess.Popen([CHILD_PY, "-c", CHILD, vllmstat_url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)
        self.url = self.out.expect(r"^url (\S+)").group(1)

    def batch(self, read, requests, iters, text=False):
        self.proc.stdin.write("batch %s\n" % json.dumps({"read": read, "requests": requests, "iters": iters,
                                                         "text": text}))
        self.proc.stdin.flush()
        m = self.out.expect(r"^ok (\d+) (\d+)")
        return int(m.group(1)), int(m.group(2))

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("exit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=WAIT)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=WAIT)
        for s in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                s.close()
            except OSError:
                pass


def want(requests):
    """The step's token keys from its requests: every candidate counts its request's prompt."""
    w = {"prompt_tokens": 0, "generation_tokens": 0, "cached_tokens": 0, "finished_requests": 0}
    reasons, ttft = {}, []
    for r in requests:
        for c in r["candidates"]:
            w["prompt_tokens"] += r["prompt"]
            w["cached_tokens"] += r["cached"]
            w["generation_tokens"] += c["gen"]
            w["finished_requests"] += 1
            reasons[c["reason"]] = reasons.get(c["reason"], 0) + 1
            ttft.append(c["ttft"])
    return w, reasons, ttft


class InstrumentEndToEnd(unittest.TestCase):
    def setUp(self):
        need(CHILD_PY is not None, "no Python with prometheus_client for the engine process")
        self.tmp = tempfile.mkdtemp()
        write_standin(self.tmp)
        self.vs = Vllmstat(self.tmp)
        self.engine = None

    def tearDown(self):
        if self.engine:
            self.engine.stop()
        self.vs.stop()
        self.vs.proc.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check(self, rec, step, requests, running, kv):
        self.assertEqual(rec["step"], step)
        m = rec["metrics"]
        w, reasons, ttft = want(requests)
        for k, v in w.items():
            self.assertEqual(m.get("trtllm/" + k), v, "step %d trtllm/%s in %s" % (step, k, m))
        for reason, n in reasons.items():
            self.assertEqual(m.get("trtllm/request_success/" + reason), n, "step %d %s" % (step, reason))
        self.assertAlmostEqual(m["trtllm/truncated_fraction"], reasons.get("length", 0) / w["finished_requests"],
                               places=12)
        self.assertAlmostEqual(m["trtllm/prefix_cache_hit_rate"], w["cached_tokens"] / w["prompt_tokens"], places=12)
        self.assertAlmostEqual(m["trtllm/time_to_first_token_seconds/mean"], sum(ttft) / len(ttft), places=9)
        # every drained iteration of the step had the same gauges; the samples before the
        # step's drain have the previous step's values, which are lower
        self.assertEqual(m["trtllm/num_requests_running/max"], running, m)
        self.assertAlmostEqual(m["trtllm/kv_cache_usage_perc/max"], kv, places=12)
        self.assertFalse(any(k.startswith("vllm/") for k in m), m)

    def test_steps_hold_what_the_in_process_engine_produced(self):
        client = Client(self.vs.url, strict=True, timeout=WAIT)
        self.engine = Engine(self.tmp, self.vs.url)
        self.assertTrue(self.engine.url.startswith("http://127.0.0.1:"), self.engine.url)
        wait_for(lambda: client.targets() == [self.engine.url], "the page among vllmstat's targets")
        wait_for(lambda: scraped_ok(client, self.engine.url), "vllmstat's first scrape of the page")
        client.end_step(0)

        # step 1: awaited together, as NeMo-RL's worker reads them
        reqs = [request(100, 40, ("stop", 17, 0.25, 1.5)),
                request(300, 0, ("length", 64, 0.5, 3.0)),
                request(50, 50, ("stop", 3, 0.125, 0.75), chunks=1)]
        got = self.engine.batch("await", reqs, [iteration(3, 1, 30, 100)] * 4)
        self.check(client.end_step(1), 1, reqs, 3, 0.3)
        self.assertEqual(got, (3, 4))  # (requests, iterations) logged so far, each once

        # step 2: read by result() and by streaming; one request with two candidates, each
        # logged as the server logs candidates; iteration statistics as older releases give
        # them, JSON text
        reqs2 = [request(200, 64, ("stop", 9, 0.0625, 0.5), ("length", 32, 0.375, 2.0))]
        reqs3 = [request(80, 16, ("stop", 5, 0.25, 0.5), chunks=5)]
        got2 = self.engine.batch("result", reqs2, [iteration(5, 0, 50, 100)] * 2)
        got3 = self.engine.batch("stream", reqs3, [iteration(5, 2, 60, 100)], text=True)
        self.check(client.end_step(2), 2, reqs2 + reqs3, 5, 0.6)
        self.assertEqual((got2, got3), ((5, 6), (6, 7)))

        # a step with no requests counts none
        rec = client.end_step(3)
        self.assertEqual(rec["metrics"].get("trtllm/prompt_tokens"), 0, rec)
        self.assertEqual(rec["metrics"].get("trtllm/finished_requests"), 0, rec)


class Recorder:
    """A collector that keeps what it was given; with fail, it raises instead."""

    def __init__(self, fail=False):
        self.requests, self.iterations, self.fail = [], [], fail

    def log_request_metrics_dict(self, d):
        if self.fail:
            raise RuntimeError("collector broke")
        self.requests.append(d)

    def log_iteration_stats(self, stats):
        self.iterations.append(stats)


class Handled:
    """A result that handles responses as TensorRT-LLM's does: the final one finishes it."""

    def __init__(self, metrics_dict=None, candidate_metrics=None):
        self.finished = False
        self.handled = 0
        self.metrics_dict = metrics_dict
        self.candidate_metrics = candidate_metrics

    def _handle_response(self, final):
        self.handled += 1
        self.finished = self.finished or final
        return "handled"


class Watching(unittest.TestCase):
    """What instrument() does to each request's result, with a collector that records calls."""

    def watched(self, result, fail=False):
        inst = vllmstat.trtllm._Instrumented(Recorder(fail), {})
        inst.watch(result)
        return inst

    def test_a_result_is_logged_once_at_its_finish(self):
        r = Handled(metrics_dict={"finished_reason": "stop", "n": 1})
        inst = self.watched(r)
        self.assertEqual(r._handle_response(False), "handled")
        self.assertEqual(inst.collector.requests, [])  # not finished yet
        self.assertFalse(inst.wake.is_set())
        r._handle_response(True)
        self.assertEqual(inst.collector.requests, [{"finished_reason": "stop", "n": 1}])
        self.assertTrue(inst.wake.is_set())  # the finish wakes the drain
        r._handle_response(True)  # handled again after its finish: not logged again
        self.assertEqual(len(inst.collector.requests), 1)
        self.assertEqual(r.handled, 3)

    def test_each_candidate_is_logged_and_not_the_result_dict_too(self):
        r = Handled(metrics_dict={"finished_reason": "length"},
                    candidate_metrics=[{"finished_reason": "stop"}, {"finished_reason": "length"}])
        inst = self.watched(r)
        r._handle_response(True)
        self.assertEqual(inst.collector.requests, [{"finished_reason": "stop"}, {"finished_reason": "length"}])

    def test_a_result_without_metrics_logs_nothing(self):
        r = Handled(metrics_dict={})
        inst = self.watched(r)
        r._handle_response(True)
        self.assertEqual(inst.collector.requests, [])
        self.assertTrue(inst.wake.is_set())

    def test_a_failing_collector_warns_and_the_request_goes_on(self):
        r = Handled(metrics_dict={"finished_reason": "stop"})
        inst = self.watched(r, fail=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(r._handle_response(True), "handled")
        self.assertEqual([str(x.message) for x in w],
                         ["vllmstat.trtllm: cannot record a finished request's metrics: collector broke"])

    def test_a_result_it_cannot_watch_warns_once_and_is_returned_as_it_is(self):
        inst = vllmstat.trtllm._Instrumented(Recorder(), {})

        class Bare:
            def generate_async(self, inputs):
                return object()
        llm = Bare()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            inst.attach(llm, llm.generate_async, drain=False)
            a, b = llm.generate_async(1), llm.generate_async(2)
        self.assertIsNot(a, b)
        self.assertEqual([str(x.message) for x in w],
                         ["vllmstat.trtllm: object has no _handle_response; its requests' metrics are not recorded"])


class Draining(unittest.TestCase):
    def test_statistics_are_drained_after_a_finish_and_a_failed_drain_is_retried_at_the_next(self):
        class Engine:
            def __init__(self):
                self.calls = 0
                self.queued = []

            def generate_async(self, inputs):
                return Handled(metrics_dict={"finished_reason": "stop"})

            def get_stats(self, timeout=2):
                self.calls += 1
                if self.calls == 1:
                    raise RuntimeError("stats queue broke")
                out, self.queued = self.queued, []
                return out

        llm = Engine()
        inst = vllmstat.trtllm._Instrumented(Recorder(), {})
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            inst.attach(llm, llm.generate_async, drain=True)  # wakes once at start, as the server
            wait_for(lambda: llm.calls == 1 and w, "the first drain's failure")
            self.assertEqual([str(x.message) for x in w],
                             ["vllmstat.trtllm: cannot drain the engine's iteration statistics: stats queue broke"])
            llm.queued = [{"numActiveRequests": 2}, '{"numActiveRequests": 1}']  # older releases: JSON text
            r = llm.generate_async({})
            r._handle_response(True)
            wait_for(lambda: len(inst.collector.iterations) == 2, "the drain after the finish")
        self.assertEqual(inst.collector.iterations, [{"numActiveRequests": 2}, {"numActiveRequests": 1}])
        self.assertEqual(inst.collector.requests, [{"finished_reason": "stop"}])


class InstrumentRefuses(unittest.TestCase):
    def test_an_object_without_generate_async_is_refused_by_name(self):
        with self.assertRaisesRegex(TypeError, r"object has no generate_async method"):
            vllmstat.trtllm.instrument(object())

    def test_an_engine_without_get_stats_is_refused_when_it_would_drain(self):
        class NoStats:
            def generate_async(self, inputs):
                return None
        with self.assertRaisesRegex(TypeError, r"NoStats has no get_stats method.*enable_iter_perf_stats"):
            vllmstat.trtllm.instrument(NoStats())

    def test_without_tensorrt_llm_the_error_names_it(self):
        code = ("import sys, warnings\n"
                "sys.modules['tensorrt_llm'] = None\n"  # not importable, whatever is installed
                "import vllmstat.trtllm\n"
                "class A:\n"
                "    return_perf_metrics = True\n"
                "class E:\n"
                "    args = A()\n"
                "    def generate_async(self, inputs): pass\n"
                "    def get_stats(self, timeout=2): return []\n"
                "try:\n"
                "    vllmstat.trtllm.instrument(E())\n"
                "except ImportError as e:\n"
                "    print('ImportError', e)\n")
        p = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ImportError vllmstat.trtllm.instrument needs TensorRT-LLM's MetricsCollector "
                      "(tensorrt_llm.metrics)", p.stdout)

    def test_one_engine_per_process_and_again_for_the_same_one_only_exposes(self):
        need(CHILD_PY is not None, "no Python with prometheus_client")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        write_standin(tmp)
        code = ("import vllmstat.trtllm\n"
                "vllmstat.trtllm.expose = lambda *a, **kw: 'URL'  # no vllmstat here\n"
                "from tensorrt_llm.metrics import MetricsCollector\n"
                "class A:\n"
                "    return_perf_metrics = True\n"
                "    backend = 'pytorch'\n"
                "    def __init__(self, model): self.model = model\n"
                "class E:\n"
                "    def __init__(self, model): self.args = A(model)\n"
                "    def generate_async(self, inputs): pass\n"
                "    def get_stats(self, timeout=2): return []\n"
                "one = E('m1')\n"
                "print(vllmstat.trtllm.instrument(one))\n"
                "wrapped = one.generate_async\n"
                "print(vllmstat.trtllm.instrument(one), one.generate_async is wrapped, MetricsCollector.made)\n"
                "try:\n"
                "    vllmstat.trtllm.instrument(E('m2'))\n"
                "except ValueError as e:\n"
                "    print('ValueError', e)\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.join(tmp, "standin"), DECL]))
        p = subprocess.run([CHILD_PY, "-c", code], cwd=tmp, capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines(), [
            "URL",
            "URL True 1",
            "ValueError vllmstat.trtllm.instrument: this process already records an engine with labels "
            "{'model_name': 'm1', 'engine_type': 'pytorch'}; another with {'model_name': 'm2', 'engine_type': "
            "'pytorch'} cannot have a collector of its own in the same registry"])

    def test_metrics_off_in_the_llm_arguments_warns(self):
        code = ("import sys, warnings\n"
                "sys.modules['tensorrt_llm'] = None\n"
                "import vllmstat.trtllm\n"
                "class A:\n"
                "    return_perf_metrics = False\n"
                "class E:\n"
                "    args = A()\n"
                "    def generate_async(self, inputs): pass\n"
                "    def get_stats(self, timeout=2): return []\n"
                "with warnings.catch_warnings(record=True) as w:\n"
                "    warnings.simplefilter('always')\n"
                "    try:\n"
                "        vllmstat.trtllm.instrument(E())\n"
                "    except ImportError:\n"
                "        pass\n"
                "print([str(x.message) for x in w])\n")
        p = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("do not have return_perf_metrics=True", p.stdout)


if __name__ == "__main__":
    warnings.simplefilter("default")
    unittest.main()
