"""Read one scrape of vLLM's ``/metrics``: which series we keep, under which key, and
the per-engine snapshot they make.

This is the parsing half of ``vllm_metrics``: text in, one ``EngineSnapshot`` per
``engine`` label out. It knows the exposed names and the Prometheus text format,
and nothing about windows; ``window`` turns two snapshots into figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from engine.parsers import ParseError

# Exposed sample name → our key. Older names (hidden since 0.10/0.11, removed in 0.12)
# are accepted as aliases so an old engine still charts.
GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
}
COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:gpu_prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:num_preemptions_total": "num_preemptions",
}
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:time_per_output_token_seconds": "itl",
    "vllm:e2e_request_latency_seconds": "e2e",
}
SUCCESS = "vllm:request_success_total"


@dataclass
class Histogram:
    """Cumulative buckets of one histogram series: ``bounds[i]`` is ``le`` (last is +Inf)."""

    bounds: list[float]
    cumulative: list[float]
    count: float
    sum: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "bounds": [b if math.isfinite(b) else "+Inf" for b in self.bounds],
            "cumulative": self.cumulative,
            "count": self.count,
            "sum": self.sum,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        return cls(
            [float(b) for b in data["bounds"]],
            [float(c) for c in data["cumulative"]],
            float(data["count"]),
            float(data["sum"]),
        )


@dataclass
class EngineSnapshot:
    """The values one engine (DP rank) exposed in one scrape."""

    engine: str
    model_name: str
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    success: dict[str, float] = field(default_factory=dict)  # finished_reason → total
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "model_name": self.model_name,
            "gauges": self.gauges,
            "counters": self.counters,
            "success": self.success,
            "histograms": {k: h.to_dict() for k, h in self.histograms.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineSnapshot:
        return cls(
            engine=str(data["engine"]),
            model_name=str(data["model_name"]),
            gauges={k: float(v) for k, v in data["gauges"].items()},
            counters={k: float(v) for k, v in data["counters"].items()},
            success={k: float(v) for k, v in data["success"].items()},
            histograms={
                k: Histogram.from_dict(h) for k, h in data["histograms"].items()
            },
        )


def _float(value: Any, where: str, text: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ParseError(f"{where}: {value!r} is not a number", raw=text) from None


@dataclass
class _Read:
    """What the ``vllm:`` samples of one scrape add up to, before histograms are assembled."""

    engines: dict[str, EngineSnapshot] = field(default_factory=dict)
    buckets: dict[tuple[str, str], dict[float, float]] = field(default_factory=dict)
    hist_totals: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)


def parse_exposition(text: str) -> dict[str, EngineSnapshot]:
    """Parse a ``/metrics`` body into one snapshot per ``engine`` label value.

    Raises ParseError when the text is not Prometheus exposition format, or when it
    carries no ``vllm:`` series at all (the engine runs with ``--disable-log-stats``
    or the URL is not a vLLM server).
    """
    if not text or not text.strip():
        raise ParseError("empty /metrics response", raw=text)
    read = _Read()
    for sample in _vllm_samples(text):
        _read_sample(read, sample, text)
    if not read.engines:  # every vllm: sample makes its engine's snapshot
        raise ParseError(
            "no vllm:* series in /metrics; is the engine running with --disable-log-stats?",
            raw=text[:4000],
        )
    _assemble_histograms(read, text)
    return read.engines


def _vllm_samples(text: str) -> list[Sample]:
    """The ``vllm:`` samples of the exposition, in the order printed; ParseError if it is not one."""
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, TypeError) as exc:
        raise ParseError(f"not Prometheus text format: {exc}", raw=text) from None
    return [
        sample
        for family in families
        for sample in family.samples
        if sample.name.startswith("vllm:")
    ]


def _read_sample(read: _Read, sample: Sample, text: str) -> None:
    """File one sample under its engine: a gauge, a counter, a success total or a histogram part."""
    name = sample.name
    labels = sample.labels
    engine_label = labels.get(
        "engine", "0"
    )  # docs examples before the engine label: one engine
    snap = read.engines.get(engine_label)
    if snap is None:
        snap = read.engines[engine_label] = EngineSnapshot(
            engine=engine_label, model_name=labels.get("model_name", "")
        )
    value = _float(sample.value, name, text)
    if name in GAUGES:
        snap.gauges[GAUGES[name]] = value
    elif name in COUNTERS:
        snap.counters[COUNTERS[name]] = value
    elif name == SUCCESS:
        reason = labels.get("finished_reason", "unknown")
        snap.success[reason] = value
    else:
        _read_histogram_sample(read, engine_label, sample, value, text)


def _read_histogram_sample(
    read: _Read, engine_label: str, sample: Sample, value: float, text: str
) -> None:
    """Keep a ``_bucket`` (by its ``le``), ``_count`` or ``_sum`` of a histogram we chart."""
    name = sample.name
    base, _, suffix = name.rpartition("_")
    key = HISTOGRAMS.get(base)
    if key is None:
        return
    if suffix == "bucket":
        le = sample.labels.get("le")
        if le is None:
            raise ParseError(f"{name} without an le label", raw=text)
        read.buckets.setdefault((engine_label, key), {})[
            _float(le, f"{name} le", text)
        ] = value
    elif suffix in ("count", "sum"):
        read.hist_totals.setdefault((engine_label, key), {})[suffix] = value


def _assemble_histograms(read: _Read, text: str) -> None:
    """Sort each series' buckets by ``le`` into a Histogram; ParseError if they decrease."""
    for (engine_label, key), by_le in read.buckets.items():
        bounds = sorted(by_le)
        cumulative = [by_le[b] for b in bounds]
        if any(b > a for a, b in zip(cumulative[1:], cumulative, strict=False)):
            raise ParseError(
                f"histogram {key} of engine {engine_label} has decreasing cumulative buckets",
                raw=text[:4000],
            )
        totals = read.hist_totals.get((engine_label, key), {})
        read.engines[engine_label].histograms[key] = Histogram(
            bounds,
            cumulative,
            totals.get("count", cumulative[-1]),
            totals.get("sum", 0.0),
        )
