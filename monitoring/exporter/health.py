"""The console's own health: ingest lag, rate and duration, nodes by state, recent sample
errors, operations by state, the gateway's upstream errors and each cluster's engine
figures. Separate from the npu-exporter families (``npu.py``): these names are the
console's own and read its rounds, nodes, operations and engine samples.
"""

from __future__ import annotations

from collections import Counter as TallyCounter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db.models import Count
from django.utils import timezone
from prometheus_client.core import Metric

from console.gateway.upstream_errors import upstream_errors_total
from console.models import Cluster, Node
from monitoring.exporter.npu import _gauge
from monitoring.models import CollectRound, EngineSample, SampleError

ENGINE_EXPORT = {
    "running": (
        "console_engine_requests_running",
        "Requests running (sum over DP ranks).",
    ),
    "waiting": (
        "console_engine_requests_waiting",
        "Requests waiting (sum over DP ranks).",
    ),
    "kv_cache_pct": (
        "console_engine_kv_cache_usage_percent",
        "KV-cache usage, mean over DP ranks (0-100).",
    ),
    "ttft_p50": (
        "console_engine_ttft_p50_seconds",
        "Time to first token p50 over the last window.",
    ),
    "ttft_p99": (
        "console_engine_ttft_p99_seconds",
        "Time to first token p99 over the last window.",
    ),
    "itl_p50": (
        "console_engine_itl_p50_seconds",
        "Inter-token latency p50 over the last window.",
    ),
    "itl_p99": (
        "console_engine_itl_p99_seconds",
        "Inter-token latency p99 over the last window.",
    ),
    "e2e_p99": (
        "console_engine_e2e_p99_seconds",
        "End-to-end request latency p99 over the last window.",
    ),
    "gen_tps": (
        "console_engine_generation_tokens_per_second",
        "Generation tokens per second over the last window.",
    ),
    "prompt_tps": (
        "console_engine_prompt_tokens_per_second",
        "Prompt tokens per second over the last window.",
    ),
}


def _console_families() -> Iterator[Metric]:
    """The console's own families, in exposition order."""
    now = timezone.now()
    last = CollectRound.objects.order_by("-started_at").first()
    yield _ingest_lag_family(now, last)
    yield _ingest_rate_family(now)
    yield _ingest_duration_family(last)
    yield _nodes_family()
    yield _sample_errors_family(now)
    yield _operations_family()
    yield _gateway_errors_family()
    yield from _engine_families(now)


def _ingest_lag_family(now: datetime, last: CollectRound | None) -> Metric:
    lag = _gauge(
        "console_ingest_lag_seconds",
        "Seconds since the last collection round finished ingesting.",
        [],
    )
    if last is not None:
        lag.add_metric([], max(0.0, (now - last.finished_at).total_seconds()))
    return lag


def _ingest_rate_family(now: datetime) -> Metric:
    recent = list(
        CollectRound.objects.filter(
            started_at__gte=now - timedelta(minutes=1)
        ).values_list("rows", flat=True)
    )
    rate = _gauge(
        "console_samples_per_second",
        "Sample rows ingested per second over the last minute.",
        [],
    )
    rate.add_metric([], sum(recent) / 60.0)
    return rate


def _ingest_duration_family(last: CollectRound | None) -> Metric:
    dur = _gauge(
        "console_ingest_duration_seconds",
        "Time the last round spent parsing and storing.",
        [],
    )
    if last is not None:
        dur.add_metric([], last.ingest_ms / 1000.0)
    return dur


def _nodes_family() -> Metric:
    states = _gauge(
        "console_nodes",
        "Nodes by state (stale and unreachable nodes missed samples).",
        ["state"],
    )
    tally = TallyCounter(
        dict(
            Node.objects.values_list("state")
            .annotate(n=Count("id"))
            .values_list("state", "n")
        )
    )
    for state in (
        "unknown",
        "ready",
        "running",
        "stale",
        "unreachable",
        "out_of_service",
    ):
        states.add_metric([state], float(tally.get(state, 0)))
    return states


def _sample_errors_family(now: datetime) -> Metric:
    errors = _gauge(
        "console_sample_errors_15m",
        "Collection/parse errors recorded in the last 15 minutes.",
        [],
    )
    errors.add_metric(
        [],
        float(SampleError.objects.filter(ts__gte=now - timedelta(minutes=15)).count()),
    )
    return errors


def _gateway_errors_family() -> Metric:
    """Engine errors (refused, broken, 5xx) the gateway saw, per cluster: a counter."""
    import redis
    from prometheus_client.core import CounterMetricFamily

    fam = CounterMetricFamily(
        "console_gateway_upstream_errors",
        "Engine errors (connection refused, broken exchange, 5xx) the gateway saw.",
        labels=["cluster"],
    )
    try:
        totals = upstream_errors_total(
            redis.Redis.from_url(str(settings.REDIS_URL), socket_timeout=2)
        )
    except redis.RedisError:
        return fam
    names = dict(Cluster.objects.filter(pk__in=list(totals)).values_list("pk", "name"))
    for pk, n in sorted(totals.items()):
        if pk in names:
            fam.add_metric([names[pk]], float(n))
    return fam


def _operations_family() -> Metric:
    fam = _gauge("console_operations", "Operations by state.", ["state"])
    try:
        model = apps.get_model("console", "Operation")
    except LookupError:
        return fam  # the operations app is not installed yet
    field = "state" if any(f.name == "state" for f in model._meta.fields) else "status"
    for state, n in (
        model.objects.values_list(field).annotate(n=Count("id")).values_list(field, "n")
    ):
        fam.add_metric([str(state)], float(n))
    return fam


def _engine_families(now: Any) -> Iterator[Metric]:
    fams = {
        k: _gauge(name, doc, ["cluster"]) for k, (name, doc) in ENGINE_EXPORT.items()
    }
    seen: set[int] = set()
    recent = (
        EngineSample.objects.filter(engine="all", ts__gte=now - timedelta(minutes=5))
        .select_related("cluster")
        .order_by("-ts")
    )
    for sample in recent[:500]:
        if sample.cluster_id in seen:
            continue
        seen.add(sample.cluster_id)
        for key, fam in fams.items():
            value = getattr(sample, key)
            if value is not None:
                fam.add_metric([sample.cluster.name], float(value))
    yield from fams.values()
