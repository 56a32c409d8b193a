"""Parse vLLM's Prometheus ``/metrics`` and derive windowed figures from two scrapes.

vLLM (V1 engine, 0.23 / 0.33) labels every engine series with ``model_name`` and
``engine`` (the DP rank); counters carry ``_total``; latency histograms use the
bucket bounds of ``vllm/v1/metrics/buckets.py`` (reference/vllm-facts.md §1).

Percentiles come from the *difference* of two consecutive scrapes' cumulative
buckets, interpolated the way PromQL's ``histogram_quantile`` does, so p99 over
the last window means the last window and not the process lifetime. A counter or
histogram that went down was reset (engine restart): the new value is the delta.

``exposition`` reads one scrape into per-engine snapshots; ``window`` turns two
snapshots into the figures of the window between them.
"""

from engine.parsers.vllm_metrics.exposition import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    SUCCESS,
    EngineSnapshot,
    Histogram,
    parse_exposition,
)
from engine.parsers.vllm_metrics.window import (
    CLUSTER,
    QUANTILES,
    EngineWindow,
    derive,
    histogram_delta,
    histogram_quantile,
)

__all__ = [
    "CLUSTER",
    "COUNTERS",
    "GAUGES",
    "HISTOGRAMS",
    "QUANTILES",
    "SUCCESS",
    "EngineSnapshot",
    "EngineWindow",
    "Histogram",
    "derive",
    "histogram_delta",
    "histogram_quantile",
    "parse_exposition",
]
