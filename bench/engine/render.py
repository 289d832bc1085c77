"""The CPU of rendering expose()'s restricted page with two versions of the Python client, in
one process: both render the same registry, one right after the other, alternating.

    python3 render.py --names FILE --before DIR [--after DIR] [--engines 8] [--renders N]

DIR is a directory holding a vllmstat package (a checkout's clients/python); --after defaults
to this repository's. Each version's vllmstat/page.py is loaded as a module of its own and
answers vllmstat's query (actor.py's) for a registry of vLLM's families (actor.Engines); per
render, the CPU of this thread, with every sample changed before each render (busy) and with
the values left alone (idle). Both pages are checked to be the same first.

compare.py measures a whole scrape, each version in a process of its own; on a machine shared
with other work its figures move by a third between runs of the same client. Here both
versions run under the same load at the same moments (the same client against itself gives a
ratio near 1.00); it leaves out the HTTP side, which page.py's render does not touch.
Prints markdown.
"""

import argparse
import importlib.util
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import actor  # noqa: E402
import vllmpage  # noqa: E402


def load(name, client):
    """client's vllmstat/page.py as a module of its own (it imports only the standard library)."""
    path = os.path.join(client, "vllmstat", "page.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--names", required=True, help="sample names vllmstat reads, one a line")
    p.add_argument("--before", required=True, help="directory holding the earlier vllmstat package")
    p.add_argument("--after", default=os.path.join(actor.REPO, "clients", "python"),
                   help="directory holding the later vllmstat package (default: this repository's)")
    p.add_argument("--engines", type=int, default=8)
    p.add_argument("--renders", type=int, default=300, help="renders per version and case")
    p.add_argument("--fixture", default=os.path.join(actor.REPO, vllmpage.DEFAULT_FIXTURE))
    args = p.parse_args()
    for flag, d in (("--before", args.before), ("--after", args.after)):
        if not os.path.isfile(os.path.join(d, "vllmstat", "page.py")):
            p.error("%s: %s holds no vllmstat package with a page (vllmstat/page.py)" % (flag, d))
    with open(args.names, encoding="utf-8") as f:
        query = actor.vllmstat_query([ln.strip() for ln in f])
    with open(args.fixture, encoding="utf-8") as f:
        engines = actor.Engines(f.read(), args.engines)
    accept = actor.HEADERS["Accept"]
    pages = {side: load("page_" + side, getattr(args, side))._Page(engines.registry) for side in ("before", "after")}

    def render(side):
        return pages[side].answer("GET", "/metrics", query, accept, "identity")

    for _ in range(3):  # the templates are made on the first renders
        engines.change()
        if render("before") != render("after"):
            sys.exit("the two versions' pages differ")
    size = len(render("after")[2])
    print(f"## expose()'s restricted render, before and after, {args.engines} engines, "
          f"{args.renders} renders each\n")
    print("CPU per render in this process (µs, median); the ratio after / before of the medians.\n")
    print("| values | before | after | ratio | page bytes |")
    print("|---|---:|---:|---:|---:|")
    for busy in (False, True):
        took = {"before": [], "after": []}
        for i in range(args.renders):
            for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
                if busy:
                    engines.change()
                t0 = time.thread_time()
                render(side)
                took[side].append(time.thread_time() - t0)
        before, after = (statistics.median(took[s]) * 1e6 for s in ("before", "after"))
        print(f"| {'busy' if busy else 'idle'} | {before:.0f} | {after:.0f} | {after / before:.2f} | {size} |")
    print(f"\nMachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
