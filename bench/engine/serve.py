"""Serves the vLLM-like registry of vllmpage.py on 127.0.0.1 the way vLLM does, and prints
"PORT <n>" on stdout once it listens. It runs until killed.

    python3 serve.py [--app asgi|wsgi] [--populated] [--multiproc DIR] [--fixture FILE]

asgi: prometheus_client's make_asgi_app under uvicorn with uvloop and httptools, as vLLM's API
server runs it (keep-alive; the page is rendered on the event loop). wsgi: make_wsgi_app under
the threading wsgiref server that prometheus_client's start_http_server uses (HTTP/1.0, one
connection per request). Both call the same _bake_output: name[] restriction and gzip. The
ASGI app of prometheus_client before its query string fix ignores name[]; --asgi-query-fix
serves it as fixed releases do.

--multiproc DIR serves what vLLM serves with several API server processes: the metrics write to
DIR, and the served registry holds only a MultiProcessCollector reading DIR.
"""

import argparse
import os
import socket
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--app", choices=("asgi", "wsgi"), default="asgi")
    p.add_argument("--populated", action="store_true",
                   help="give every family of the fixture its per-engine series")
    p.add_argument("--multiproc", metavar="DIR")
    p.add_argument("--fixture", default=None)
    p.add_argument("--asgi-query-fix", action="store_true",
                   help="decode the query string before make_asgi_app parses it, as "
                        "prometheus_client does since its ASGI query string fix")
    args = p.parse_args()
    if args.multiproc:
        # prometheus_client picks its multiprocess value storage when it is imported.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = args.multiproc

    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import vllmpage

    with open(args.fixture or vllmpage.DEFAULT_FIXTURE, encoding="utf-8") as f:
        fixture = f.read()
    if args.multiproc:
        vllmpage.build(fixture, args.populated, registry=CollectorRegistry())
        # vLLM's get_prometheus_registry: a plain registry with only the collector.
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = vllmpage.build(fixture, args.populated)

    if args.app == "asgi":
        serve_asgi(registry, args.asgi_query_fix)
    else:
        serve_wsgi(registry)


def serve_asgi(registry, query_fix):
    import uvicorn
    from prometheus_client import make_asgi_app

    app = make_asgi_app(registry)
    if query_fix:
        # This prometheus_client parses the raw bytes query string, so its name[] check never
        # matches and every request gets the full page. Later releases decode it first.
        shipped = app

        async def fixed(scope, receive, send):
            scope = dict(scope, query_string=scope.get("query_string", b"").decode("utf8"))
            await shipped(scope, receive, send)

        app = fixed

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # so that a client connecting before uvicorn starts waits, not fails
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, loop="uvloop", http="httptools",
                            log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    print(f"PORT {port}", flush=True)
    server.run(sockets=[sock])


def serve_wsgi(registry):
    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler
    from wsgiref.simple_server import make_server

    httpd = make_server("127.0.0.1", 0, make_wsgi_app(registry), ThreadingWSGIServer,
                        handler_class=_SilentHandler)
    print(f"PORT {httpd.server_port}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
