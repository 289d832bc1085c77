"""The work of vLLM's get_metrics_snapshot() (vllm/v1/metrics/reader.py), which NeMo-RL's vLLM
metrics logger calls in the engine's Ray actor every vllm_metrics_logger_interval (0.5 s in its
example configurations), from a thread of its own.

snapshot(registry) does what that function does, written here from its description: it walks
every collector of the registry (collect()), keeps the families named "vllm:...", and turns
each sample into a Python object: one Gauge per gauge sample, one Counter per "_total" sample
(an int), one Vector per engine for the per-position speculative decoding counter, and one
Histogram per series with its buckets in a dict keyed by "le", its count and its sum. vLLM is
not needed to run it.
"""

from dataclasses import dataclass
from typing import Dict, List

PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


@dataclass
class Metric:
    name: str
    labels: Dict[str, str]


@dataclass
class Counter(Metric):
    value: int


@dataclass
class Gauge(Metric):
    value: float


@dataclass
class Vector(Metric):
    values: List[int]


@dataclass
class Histogram(Metric):
    count: int
    sum: float
    buckets: Dict[str, int]


def snapshot(registry):
    """Returns the registry's vllm: series as Gauge, Counter, Vector and Histogram objects."""
    out = []
    for family in registry.collect():
        name = family.name
        if not name.startswith("vllm:"):
            continue
        if family.type == "gauge":
            out.extend(Gauge(name, s.labels, s.value) for s in _named(family, name))
        elif family.type == "counter":
            totals = _named(family, name + "_total")
            if name == PER_POSITION:
                out.extend(Vector(name, labels, values) for labels, values in _by_position(totals))
            else:
                out.extend(Counter(name, s.labels, int(s.value)) for s in totals)
        elif family.type == "histogram":
            out.extend(_histograms(family))
    return out


def _named(family, sample_name):
    return [s for s in family.samples if s.name == sample_name]


def _without(labels, key):
    rest = dict(labels)
    del rest[key]
    return rest


def _histograms(family):
    """One Histogram per label set, from the family's _bucket, _count and _sum samples."""
    name = family.name
    buckets, counts, sums = {}, {}, {}
    for s in _named(family, name + "_bucket"):
        key = frozenset(_without(s.labels, "le").items())
        buckets.setdefault(key, {})[s.labels["le"]] = int(s.value)
    for s in _named(family, name + "_count"):
        counts[frozenset(s.labels.items())] = int(s.value)
    for s in _named(family, name + "_sum"):
        sums[frozenset(s.labels.items())] = s.value
    if not buckets.keys() == counts.keys() == sums.keys():
        raise ValueError(f"{name}: buckets, counts and sums of different series")
    return [Histogram(name, dict(key), counts[key], sums[key], b) for key, b in buckets.items()]


def _by_position(samples):
    """(labels without "position", counts by position) per series of the per-position counter."""
    by_series = {}
    for s in samples:
        key = frozenset(_without(s.labels, "position").items())
        by_series.setdefault(key, {})[int(s.labels["position"])] = int(s.value)
    if not by_series:
        return []
    width = 1 + max(p for positions in by_series.values() for p in positions)
    out = []
    for key, positions in by_series.items():
        values = [0] * width
        for p, v in positions.items():
            values[p] = v
        out.append((dict(key), values))
    return out
