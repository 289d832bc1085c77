"""Renders trtllm-serve's /prometheus/metrics pages as prometheus_client renders TensorRT-LLM's
multiprocess registry: the server's process (given a fixed pid, which its gauges carry) sets the
families into the multiprocess directory, then MultiProcessCollector and generate_latest read
them, as OpenAIServer.mount_metrics serves them."""
import os
import shutil
import tempfile

LABELS = {"model_name": "Qwen3-8B", "engine_type": "pytorch"}


def render_pages(run, pid=3101):
    """Runs run(collector, page) in a process of its own, where page() renders the page as it
    stands; returns what run returns (it must be JSON-able text or a list of texts)."""
    d = tempfile.mkdtemp()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        try:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = d
            from prometheus_client import values
            values.ValueClass = values.MultiProcessValue(lambda: pid)
            from prometheus_client import CollectorRegistry, generate_latest
            from prometheus_client.multiprocess import MultiProcessCollector
            import trtllm_decl

            def page():
                reg = CollectorRegistry()
                MultiProcessCollector(reg, path=d)
                return generate_latest(reg).decode()

            out = run(trtllm_decl, page)
            with os.fdopen(w, "w") as f:
                import json
                json.dump(out, f)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    _, st = os.waitpid(child, 0)
    shutil.rmtree(d)
    assert st == 0, st
    import json
    return json.loads(data)
