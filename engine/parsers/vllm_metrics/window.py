"""Figures over the window between two scrapes of vLLM's ``/metrics``.

Percentiles come from the *difference* of two consecutive scrapes' cumulative
buckets, interpolated the way PromQL's ``histogram_quantile`` does; counters are
differenced the same way, and a decrease is a reset. Separate from ``exposition``
because it works on snapshots, never on text.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.parsers.vllm_metrics.exposition import EngineSnapshot, Histogram

QUANTILES = (0.5, 0.95, 0.99)
CLUSTER = "all"  # key of the whole-cluster window in derive()


@dataclass
class EngineWindow:
    """Figures of one engine (or the cluster, engine == "all") over the window between two scrapes.

    Latencies are seconds, rates per second, percentages 0..100. A figure is None
    when it cannot be known yet (first scrape, or no request finished in the window).
    """

    engine: str
    window_s: float | None
    running: float
    waiting: float
    kv_cache_pct: float | None
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p95: float | None = None
    itl_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p95: float | None = None
    e2e_p99: float | None = None
    prompt_tps: float | None = None
    gen_tps: float | None = None
    requests_ps: float | None = None
    prefix_hit_pct: float | None = None
    preemptions: float | None = None
    success: dict[str, float] = field(
        default_factory=dict
    )  # finished_reason → requests in the window
    reset: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def histogram_quantile(
    q: float, bounds: list[float], cumulative: list[float]
) -> float | None:
    """PromQL ``histogram_quantile``: linear interpolation inside the bucket holding rank q·total.

    Returns None for an empty histogram. A rank in the +Inf bucket returns the
    highest finite bound (the histogram cannot say more).
    """
    if not bounds or not cumulative or cumulative[-1] <= 0:
        return None
    total = cumulative[-1]
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in zip(bounds, cumulative, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (
                count - prev_count
            )
        prev_bound, prev_count = bound, count
    return prev_bound


def _counter_delta(prev: float | None, cur: float) -> tuple[float, bool]:
    """Increase of a counter; a decrease means the process restarted, so the new value is the increase."""
    if prev is None:
        return 0.0, False
    if cur < prev:
        return cur, True
    return cur - prev, False


def histogram_delta(prev: Histogram | None, cur: Histogram) -> tuple[list[float], bool]:
    """Cumulative bucket counts observed between two scrapes (``cur`` alone after a reset)."""
    if prev is None or prev.bounds != cur.bounds:
        return [0.0] * len(cur.cumulative), prev is not None
    if cur.count < prev.count or any(
        c < p for c, p in zip(cur.cumulative, prev.cumulative, strict=True)
    ):
        return list(cur.cumulative), True
    return [c - p for c, p in zip(cur.cumulative, prev.cumulative, strict=True)], False


@dataclass
class _Deltas:
    bounds: dict[str, list[float]] = field(default_factory=dict)
    buckets: dict[str, list[float]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    success: dict[str, float] = field(default_factory=dict)
    reset: bool = False

    def add(self, other: _Deltas) -> None:
        for key, values in other.buckets.items():
            mine = self.buckets.get(key)
            if mine is None or self.bounds.get(key) != other.bounds[key]:
                if mine is None:
                    self.bounds[key] = other.bounds[key]
                    self.buckets[key] = list(values)
                continue  # engines with different buckets cannot be merged; keep the first
            self.buckets[key] = [a + b for a, b in zip(mine, values, strict=True)]
        for key, value in other.counters.items():
            self.counters[key] = self.counters.get(key, 0.0) + value
        for key, value in other.success.items():
            self.success[key] = self.success.get(key, 0.0) + value
        self.reset = self.reset or other.reset


def _deltas(prev: EngineSnapshot | None, cur: EngineSnapshot) -> _Deltas:
    out = _Deltas()
    for key, hist in cur.histograms.items():
        values, reset = histogram_delta(
            prev.histograms.get(key) if prev else None, hist
        )
        out.bounds[key], out.buckets[key] = hist.bounds, values
        out.reset = out.reset or reset
    for key, value in cur.counters.items():
        delta, reset = _counter_delta(prev.counters.get(key) if prev else None, value)
        out.counters[key] = delta
        out.reset = out.reset or reset
    for reason, value in cur.success.items():
        delta, reset = _counter_delta(prev.success.get(reason) if prev else None, value)
        out.success[reason] = delta
        out.reset = out.reset or reset
    return out


def _window(
    engine: str,
    deltas: _Deltas,
    window_s: float | None,
    running: float,
    waiting: float,
    kv: float | None,
) -> EngineWindow:
    win = EngineWindow(
        engine=engine,
        window_s=window_s,
        running=running,
        waiting=waiting,
        kv_cache_pct=kv,
        reset=deltas.reset,
    )
    if window_s is None:
        return win  # first scrape: no window yet, only the gauges
    for key in ("ttft", "itl", "e2e"):
        if key not in deltas.buckets:
            continue
        for q in QUANTILES:
            setattr(
                win,
                f"{key}_p{round(q * 100)}",
                histogram_quantile(q, deltas.bounds[key], deltas.buckets[key]),
            )
    if window_s > 0:
        win.prompt_tps = deltas.counters.get("prompt_tokens", 0.0) / window_s
        win.gen_tps = deltas.counters.get("generation_tokens", 0.0) / window_s
        if "e2e" in deltas.buckets:
            win.requests_ps = deltas.buckets["e2e"][-1] / window_s
    queries = deltas.counters.get("prefix_cache_queries", 0.0)
    if queries > 0:
        win.prefix_hit_pct = (
            100.0 * deltas.counters.get("prefix_cache_hits", 0.0) / queries
        )
    win.preemptions = deltas.counters.get("num_preemptions", 0.0)
    win.success = dict(deltas.success)
    return win


def derive(
    prev: dict[str, EngineSnapshot] | None,
    cur: dict[str, EngineSnapshot],
    window_s: float | None,
) -> dict[str, EngineWindow]:
    """Windows per engine label plus ``"all"`` for the cluster (bucket deltas summed, then quantiles).

    ``prev`` is the previous scrape (None on the first one); ``window_s`` the seconds
    between the two scrapes. Running/waiting add up over engines; KV-cache usage is
    the mean of the engines (each engine has its own cache of the same size).
    """
    if window_s is not None and window_s <= 0:
        raise ValueError(f"window_s must be positive, got {window_s}")
    if prev is None:
        window_s = None
    out: dict[str, EngineWindow] = {}
    total = _Deltas()
    kvs: list[float] = []
    for label in sorted(cur, key=lambda s: (len(s), s)):
        snap = cur[label]
        deltas = _deltas(prev.get(label) if prev else None, snap)
        kv = snap.gauges.get("kv_cache_usage")
        kv_pct = None if kv is None else 100.0 * kv
        if kv_pct is not None:
            kvs.append(kv_pct)
        out[label] = _window(
            label,
            deltas,
            window_s,
            snap.gauges.get("running", 0.0),
            snap.gauges.get("waiting", 0.0),
            kv_pct,
        )
        total.add(deltas)
    out[CLUSTER] = _window(
        CLUSTER,
        total,
        window_s,
        sum(w.running for w in out.values()),
        sum(w.waiting for w in out.values()),
        sum(kvs) / len(kvs) if kvs else None,
    )
    return out
