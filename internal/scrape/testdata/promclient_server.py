"""Serves a registry with a few vLLM families through prometheus_client's own WSGI app.

Prints the port, then serves until its standard input closes. With PROMETHEUS_MULTIPROC_DIR set,
the registry holds a MultiProcessCollector only, as vLLM's does when it runs several API server
processes. GET /add adds one more vLLM family (vllm:num_preemptions) to what is served.
"""
import os
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

multiproc = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
if multiproc:
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    metrics_registry = None  # values go to the directory's files
    gauge_args = {"multiprocess_mode": "livesum"}
else:
    registry = metrics_registry = CollectorRegistry()
    gauge_args = {}

labels = ["model_name", "engine"]
running = Gauge("vllm:num_requests_running", "Running requests.", labels, registry=metrics_registry, **gauge_args)
tokens = Counter("vllm:generation_tokens", "Generated tokens.", labels, registry=metrics_registry)
ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.", labels,
                 buckets=[0.01, 0.1, 1.0, 10.0], registry=metrics_registry)
other = Counter("http_requests", "Not vLLM's.", ["handler"], registry=metrics_registry)
for engine in ("0", "1"):
    running.labels("m", engine).set(3 + int(engine))
    tokens.labels("m", engine).inc(100 + int(engine))
    ttft.labels("m", engine).observe(0.05)
    ttft.labels("m", engine).observe(2.5)
for h in range(20):
    other.labels("/h%d" % h).inc(h)

metrics = make_wsgi_app(registry)


def app(environ, start_response):
    if environ["PATH_INFO"] == "/add":
        c = Counter("vllm:num_preemptions", "Preemptions.", labels, registry=metrics_registry)
        c.labels("m", "0").inc(7)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"added\n"]
    return metrics(environ, start_response)


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


server = make_server("127.0.0.1", 0, app, WSGIServer, QuietHandler)
print(server.server_port, flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
