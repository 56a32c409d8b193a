"""Guardrails: why no automatic action may be taken now, whatever the remedy.

Maintenance mode, a cluster not serving, an active operation, a benchmark's own load,
the rule's cooldown and the hourly cap. They hold for every remedy and are asked again
when an operator approves, so they live apart from the remedy-specific preconditions
(``preconditions``) and from acting (``act``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from console.models import ClusterState
from console.models.operations import Operation, OperationKind
from monitoring.models import Alert, Incident, RemediationAction
from monitoring.remediation.timeline import NEVER_ACT_ON

# Serving figures a benchmark's own load moves: alerts on them that began while one ran
# (or within BENCH_LOAD_GRACE_S after) are the benchmark's, not a fault to act on.
LOAD_METRICS = frozenset(
    {
        "engine.ttft_p99_ms",
        "engine.e2e_p99_ms",
        "engine.waiting",
        "engine.kv_cache_pct",
        "engine.kv_cache_pct_preempting",
        "engine.rank_waiting",
        "engine.rank_kv_cache_pct",
    }
)


def _benchmark_load(alert: Alert, cluster: Any, *, now: datetime) -> str:
    if alert.rule.metric not in LOAD_METRICS:
        return ""
    onset = alert.fault_onset_at or now
    grace = timedelta(seconds=settings.BENCH_LOAD_GRACE_S)
    bench = (
        Operation.objects.filter(
            cluster=cluster,
            kind=OperationKind.BENCHMARK,
            started_at__lte=onset,
            finished_at__gte=onset - grace,
        )
        .order_by("-pk")
        .first()
    )
    if bench is None:
        return ""
    return (
        f"{alert.rule.metric} rose under benchmark #{bench.pk}'s own load "
        f"(it ran {bench.started_at:%H:%M:%S}–{bench.finished_at:%H:%M:%S}); "
        "no automatic action"
    )


def _guardrail(incident: Incident, *, now: datetime) -> str:
    """Why no action may be taken now ('' = go ahead)."""
    alert, cluster = incident.alert, incident.cluster
    if alert.rule.metric in NEVER_ACT_ON:
        return "temperature alerts never trigger an automatic action (a hot chip is not restarted)"
    if incident.action == RemediationAction.NONE:
        return "the rule has a policy but no action"
    if cluster is None:
        return "the alert belongs to no cluster"
    if cluster.maintenance_mode:
        return f"{cluster.name} is in maintenance mode (automatic actions paused)"
    if (
        cluster.state not in (ClusterState.RUNNING, ClusterState.DEGRADED)
        and incident.action != RemediationAction.RESTART
    ):
        return f"{cluster.name} is {cluster.state}, not serving"
    running = Operation.objects.filter(
        cluster=cluster, finished_at__isnull=True
    ).first()
    if running is not None:
        return f"operation #{running.pk} ({running.kind}) is active on {cluster.name}"
    load = _benchmark_load(alert, cluster, now=now)
    if load:
        return load
    cooldown = timedelta(seconds=alert.rule.cooldown_s)
    recent = (
        Incident.objects.filter(
            cluster=cluster,
            action=incident.action,
            operation_started_at__gte=now - cooldown,
        )
        .exclude(pk=incident.pk)
        .order_by("-operation_started_at")
        .first()
    )
    if recent is not None:
        return f"cooldown: incident #{recent.pk} acted at {recent.operation_started_at:%H:%M:%S} (cooldown {alert.rule.cooldown_s} s)"
    hour = Incident.objects.filter(
        cluster=cluster, operation_started_at__gte=now - timedelta(hours=1)
    ).exclude(pk=incident.pk)
    acted = sum(max(1, i.attempts) for i in hour)
    if acted >= settings.REMEDIATION_MAX_ACTIONS_PER_HOUR:
        return f"{acted} automatic actions on {cluster.name} in the last hour (limit {settings.REMEDIATION_MAX_ACTIONS_PER_HOUR})"
    return ""
