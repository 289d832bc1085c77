"""What a vllmstat scrape of expose()'s page costs an engine, with two versions of the Python
client, measured one right after the other: the ratios of the two are the steadier figures on a
machine shared with other work.

    python3 compare.py --names FILE --before DIR [--after DIR] [--engines 8] [--calls N] [--reps R]

DIR is a directory holding a vllmstat package (a checkout's clients/python); --after defaults
to this repository's. Each repetition runs actor.py's expose() case (--works expose) once with
each version, each in a process of its own, the order alternating between repetitions, and
the ratio after / before is taken per repetition. Prints markdown: the medians of the
repetitions and of their ratios, and the range of the ratios.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


def run(client, args):
    """One run of actor.py's expose() case with the vllmstat package in client: {engines: {idle,
    busy: (CPU per call, of it holding the GIL), size}}."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "actor.py"), "--names", args.names,
                          "--engines", args.engines, "--calls", str(args.calls), "--runs", "1",
                          "--works", "expose", "--client", client, "--json"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    rows = {}
    for n, works in json.loads(out).items():
        row = works["expose"]
        rows[n] = {b: (row[b]["cpu"][0], row[b]["hold"][0]) for b in ("idle", "busy")}
        rows[n]["size"] = row["size"]
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--names", required=True, help="sample names vllmstat reads, one a line")
    p.add_argument("--before", required=True, help="directory holding the earlier vllmstat package")
    p.add_argument("--after", default=os.path.join(REPO, "clients", "python"),
                   help="directory holding the later vllmstat package (default: this repository's)")
    p.add_argument("--engines", default="8")
    p.add_argument("--calls", type=int, default=100, help="calls per case and run")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    for flag, d in (("--before", args.before), ("--after", args.after)):
        if not os.path.isfile(os.path.join(d, "vllmstat", "__init__.py")):
            p.error("%s: %s holds no vllmstat package (vllmstat/__init__.py)" % (flag, d))
    got = {"before": [], "after": []}
    for rep in range(args.reps):
        order = ("before", "after") if rep % 2 == 0 else ("after", "before")
        for side in order:
            got[side].append(run(getattr(args, side), args))
    print(f"## expose()'s page, before and after, {args.reps} repetitions of {args.calls} calls\n")
    print("CPU per scrape and, of it, holding the GIL (µs, median of the repetitions); the ratio "
          "after / before per repetition: median [lowest, highest].\n")
    print("| engines | values | before, CPU / GIL | after, CPU / GIL | ratio CPU | ratio GIL | page bytes |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.engines.split(","):
        for b in ("idle", "busy"):
            cells = []
            for side in ("before", "after"):
                cpu = statistics.median(r[n][b][0] for r in got[side]) * 1e6
                hold = statistics.median(r[n][b][1] for r in got[side]) * 1e6
                cells.append(f"{cpu:.0f} / {hold:.0f}")
            for k in (0, 1):
                ratios = sorted(a[n][b][k] / z[n][b][k] for z, a in zip(got["before"], got["after"]))
                cells.append(f"{statistics.median(ratios):.2f} [{ratios[0]:.2f}, {ratios[-1]:.2f}]")
            sizes = [r[n]["size"] for side in got.values() for r in side]  # the values' digits vary
            span = str(min(sizes)) if min(sizes) == max(sizes) else f"{min(sizes)}–{max(sizes)}"
            print(f"| {n} | {b} | {' | '.join(cells)} | {span} |")
    print(f"\nMachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
