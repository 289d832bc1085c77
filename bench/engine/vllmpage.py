"""A prometheus_client registry that renders the same /metrics page as a vLLM 0.20 API server.

The registry is generated from a rendered page (the fixture): every family becomes a Counter,
Gauge or Histogram with the fixture's name, HELP text, label names and histogram buckets, and
every series gets the fixture's value. The process, platform and GC collectors come from
prometheus_client itself, as in vLLM's default REGISTRY. "_created" families are not built:
prometheus_client emits them by itself for every counter and histogram child.

Some families of the fixture have no series (a labelled metric with no child renders only its
HELP and TYPE lines). A running vLLM creates every per-engine child at start-up, so with
populated=True those families get one child per engine, with vLLM's bucket bounds, which gives
the size of a real page.

The fixture has two engines; engines=N gives every per-engine series of engine 0 to N engines
(data parallel size N in one process) and drops the fixture's engine 1.

Run as a script to compare the rendered page with the fixture:
    python3 vllmpage.py [FIXTURE]
"""

import math
import sys

from prometheus_client import (CollectorRegistry, Counter, GCCollector, Gauge, Histogram,
                               PlatformCollector, ProcessCollector, generate_latest)
from prometheus_client.parser import text_string_to_metric_families

DEFAULT_FIXTURE = "internal/testkit/testdata/prometheus-client-render-vllm-0.20.prom"

# Families that prometheus_client's own collectors render (vLLM's REGISTRY has them).
DEFAULT_COLLECTOR_PREFIXES = ("process_", "python_")

# vLLM 0.20's bucket bounds for the histograms that have no series in the fixture
# (vllm/v1/metrics/loggers.py; token-count buckets are the 1-2-5 series up to a
# max_model_len of 40960).
_REQUEST_PHASE = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                  60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
_PER_TOKEN = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
              10.0, 20.0, 40.0, 80.0]
_TOKENS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000]
VLLM_BUCKETS = {
    "vllm:request_inference_time_seconds": _REQUEST_PHASE,
    "vllm:request_prefill_time_seconds": _REQUEST_PHASE,
    "vllm:request_decode_time_seconds": _REQUEST_PHASE,
    "vllm:request_time_per_output_token_seconds": _PER_TOKEN,
    "vllm:request_prompt_tokens": _TOKENS,
    "vllm:request_generation_tokens": _TOKENS,
    "vllm:request_max_num_generation_tokens": _TOKENS,
    "vllm:request_params_max_tokens": _TOKENS,
    "vllm:request_params_n": [1, 2, 5, 10, 20],
    "vllm:iteration_tokens_total": [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                                    16384],
}
ENGINES = ("0", "1")
MODEL = "Qwen/Qwen3-1.7B"


def build(fixture_text, populated=False, registry=None, engines=None):
    """Returns a registry (auto-describing, like prometheus_client.REGISTRY) that renders the
    fixture's families. With populated=True, families without series get one child per engine.
    engines=N makes N engines of the fixture's engine 0."""
    engine_ids = ENGINES if engines is None else tuple(str(e) for e in range(engines))
    if registry is None:
        registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
    families = list(text_string_to_metric_families(fixture_text))
    created = {f.name for f in families if f.name.endswith("_created") and f.type == "gauge"}
    for fam in families:
        if fam.name.startswith(DEFAULT_COLLECTOR_PREFIXES) or fam.name in created:
            continue
        if engines is not None:
            fam.samples = _per_engine(fam.samples, engine_ids)
        children = engine_ids if populated else ()
        if fam.type == "counter":
            _counter(fam, registry, children)
        elif fam.type == "gauge":
            _gauge(fam, registry)
        elif fam.type == "histogram":
            _histogram(fam, registry, children)
        else:
            raise ValueError(f"family {fam.name}: type {fam.type} is not supported")
    return registry


def _per_engine(samples, engine_ids):
    """The samples of engine 0 once per engine id, and the samples without an engine label."""
    out = [s for s in samples if "engine" not in s.labels]
    zero = [s for s in samples if s.labels.get("engine") == "0"]
    for e in engine_ids:
        out.extend(s._replace(labels=dict(s.labels, engine=e)) for s in zero)
    return out


def _labelnames(fam):
    names = {k for s in fam.samples for k in s.labels if k != "le"}
    # A family without series has no labels to read; vLLM labels them by model and engine.
    return sorted(names) if fam.samples else ["engine", "model_name"]


def _empty_children(fam, metric, engine_ids):
    if not fam.samples:
        return [metric.labels(engine=e, model_name=MODEL) for e in engine_ids]
    return []


def _counter(fam, registry, children):
    labels = _labelnames(fam)
    c = Counter(fam.name, fam.documentation, labels, registry=registry)
    for s in fam.samples:
        _child(c, labels, s.labels).inc(s.value)
    for child in _empty_children(fam, c, children):
        child.inc(0)


def _gauge(fam, registry):
    labels = _labelnames(fam)
    # vLLM's gauges are "mostrecent" in multiprocess mode; this prometheus_client predates that
    # mode, and "max" likewise renders one series per label set. Single-process ignores it.
    g = Gauge(fam.name, fam.documentation, labels, registry=registry, multiprocess_mode="max")
    for s in fam.samples:
        _child(g, labels, s.labels).set(s.value)


def _histogram(fam, registry, children):
    labels = _labelnames(fam)
    bounds = sorted({float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket")})
    if not bounds:
        bounds = [float(b) for b in VLLM_BUCKETS.get(fam.name, [1.0])] + [math.inf]
    h = Histogram(fam.name, fam.documentation, labels, buckets=bounds, registry=registry)
    series = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, []).append(s)
    for key, samples in series.items():
        _fill_histogram(_child(h, labels, dict(key)), samples, fam.name)
    for child in _empty_children(fam, h, children):
        child.observe(bounds[0])


def _fill_histogram(child, samples, name):
    """Observes values so that the child's cumulative bucket counts and sum equal the
    fixture's."""
    cumulative = sorted(((float(s.labels["le"]), s.value) for s in samples
                         if s.name == name + "_bucket"))
    total = next(s.value for s in samples if s.name == name + "_sum")
    seen = 0.0
    finite = [b for b, _ in cumulative if not math.isinf(b)]
    for bound, count in cumulative:
        value = bound if not math.isinf(bound) else finite[-1] * 2
        for _ in range(int(count - seen)):
            child.observe(value)
        seen = count
    # Observing at the bucket bounds gives the right counts; the sum is set to the fixture's
    # so that the rendered numbers are the same length as a real page's.
    child._sum.set(total)


def _child(metric, labelnames, labels):
    if not labelnames:
        return metric
    return metric.labels(**{k: labels[k] for k in labelnames})


def series(text):
    """The set of (sample name, sorted labels) of a rendered page."""
    out = set()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.add((s.name, tuple(sorted(s.labels.items()))))
    return out


def compare(fixture_text, rendered_text):
    """Returns (fixture series, rendered series, missing from render, extra in render)."""
    want, got = series(fixture_text), series(rendered_text)
    return want, got, sorted(want - got), sorted(got - want)


def main(argv):
    path = argv[1] if len(argv) > 1 else DEFAULT_FIXTURE
    with open(path, encoding="utf-8") as f:
        fixture = f.read()
    rendered = generate_latest(build(fixture)).decode()
    want, got, missing, extra = compare(fixture, rendered)
    print(f"fixture: {len(fixture)} bytes, {len(want)} series; rendered: {len(rendered)} bytes, "
          f"{len(got)} series; missing {len(missing)}, extra {len(extra)}")
    for name, labels in missing:
        print(f"  missing {name} {dict(labels)}")
    for name, labels in extra:
        print(f"  extra   {name} {dict(labels)}")
    populated = generate_latest(build(fixture, populated=True))
    print(f"with every per-engine series present: {len(populated)} bytes, "
          f"{len(series(populated.decode()))} series")
    return 1 if missing or extra else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
