"""Parse vLLM's Prometheus ``/metrics`` and derive windowed figures from two scrapes.

vLLM (V1 engine, 0.23 / 0.33) labels every engine series with ``model_name`` and
``engine`` (the DP rank); counters carry ``_total``; latency histograms use the
bucket bounds of ``vllm/v1/metrics/buckets.py`` (reference/vllm-facts.md §1).

Percentiles come from the *difference* of two consecutive scrapes' cumulative
buckets, interpolated the way PromQL's ``histogram_quantile`` does, so p99 over
the last window means the last window and not the process lifetime. A counter or
histogram that went down was reset (engine restart): the new value is the delta.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

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
QUANTILES = (0.5, 0.95, 0.99)
CLUSTER = "all"  # key of the whole-cluster window in derive()


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


def _float(value: Any, where: str, text: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ParseError(f"{where}: {value!r} is not a number", raw=text) from None


def parse_exposition(text: str) -> dict[str, EngineSnapshot]:
    """Parse a ``/metrics`` body into one snapshot per ``engine`` label value.

    Raises ParseError when the text is not Prometheus exposition format, or when it
    carries no ``vllm:`` series at all (the engine runs with ``--disable-log-stats``
    or the URL is not a vLLM server).
    """
    if not text or not text.strip():
        raise ParseError("empty /metrics response", raw=text)
    engines: dict[str, EngineSnapshot] = {}
    buckets: dict[tuple[str, str], dict[float, float]] = {}
    hist_totals: dict[tuple[str, str], dict[str, float]] = {}
    seen_vllm = False
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, TypeError) as exc:
        raise ParseError(f"not Prometheus text format: {exc}", raw=text) from None
    for family in families:
        for sample in family.samples:
            name = sample.name
            if not name.startswith("vllm:"):
                continue
            seen_vllm = True
            labels = sample.labels
            engine_label = labels.get(
                "engine", "0"
            )  # docs examples before the engine label: one engine
            snap = engines.get(engine_label)
            if snap is None:
                snap = engines[engine_label] = EngineSnapshot(
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
                base, _, suffix = name.rpartition("_")
                key = HISTOGRAMS.get(base)
                if key is None:
                    continue
                if suffix == "bucket":
                    le = labels.get("le")
                    if le is None:
                        raise ParseError(f"{name} without an le label", raw=text)
                    buckets.setdefault((engine_label, key), {})[
                        _float(le, f"{name} le", text)
                    ] = value
                elif suffix in ("count", "sum"):
                    hist_totals.setdefault((engine_label, key), {})[suffix] = value
    if not seen_vllm:
        raise ParseError(
            "no vllm:* series in /metrics; is the engine running with --disable-log-stats?",
            raw=text[:4000],
        )
    for (engine_label, key), by_le in buckets.items():
        bounds = sorted(by_le)
        cumulative = [by_le[b] for b in bounds]
        if any(b > a for a, b in zip(cumulative[1:], cumulative, strict=False)):
            raise ParseError(
                f"histogram {key} of engine {engine_label} has decreasing cumulative buckets",
                raw=text[:4000],
            )
        totals = hist_totals.get((engine_label, key), {})
        engines[engine_label].histograms[key] = Histogram(
            bounds,
            cumulative,
            totals.get("count", cumulative[-1]),
            totals.get("sum", 0.0),
        )
    return engines


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
