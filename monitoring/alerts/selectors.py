"""Reads for alerting: the latest value of every catalogue metric for every target (a few queries per round)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from console.gateway.upstream_errors import upstream_errors_take
from console.models import Cluster, ClusterState, Node, NodeState
from monitoring.alerts.rules import Observation
from monitoring.models import EngineSample, NodeLatest, ScrapeState
from monitoring.models.alerts import ACTIVE_STATES, Alert, AlertState, Severity

# A starting or draining engine is expected not to answer; only these must.
HEALTH_WATCHED = (ClusterState.RUNNING, ClusterState.DEGRADED)
ROCE_OK_HEALTH = {
    "success",
    "init",
}  # hccn_tool -net_health -g answers "Success" (or "Init" before first detect)


def _gateway_errors() -> dict[int, int] | None:
    """Engine errors the gateway counted since the last evaluation (None when Redis is down: no value)."""
    import redis

    try:
        return upstream_errors_take(
            redis.Redis.from_url(str(settings.REDIS_URL), socket_timeout=2)
        )
    except redis.RedisError:
        return None


def _roce_bad(port: dict[str, Any]) -> bool:
    link = port.get("link")
    health = port.get("net_health")
    link_bad = link not in (None, "UP")
    health_bad = health is not None and str(health).lower() not in ROCE_OK_HEALTH
    return link_bad or health_bad


def observations_collect(*, now: datetime) -> dict[str, list[Observation]]:
    """Every catalogue metric → observations of the latest samples (4 queries, whatever the node count).

    A target with no value (no sample yet, a figure the tool did not report) is absent:
    absence never opens or resolves an alert.
    """
    obs: dict[str, list[Observation]] = defaultdict(list)
    for latest in NodeLatest.objects.select_related("node"):
        if latest.node.state == NodeState.OUT_OF_SERVICE:
            continue
        _node_observations(obs, latest)
    interval = float(settings.COLLECT_INTERVAL_S)
    _unreachable_observations(obs, now=now, interval=interval)
    _engine_observations(obs, now=now, interval=interval)
    return obs


def _node_observations(obs: dict[str, list[Observation]], latest: NodeLatest) -> None:
    """A node's latest sample: its chips, then its HCCS loss, RoCE ports and engine process."""
    node = latest.node
    data = latest.data or {}
    base: dict[str, Any] = {
        "cluster_id": node.cluster_id,
        "node_id": node.pk,
        "at": latest.ts,
    }
    _chip_observations(obs, node, data, base)
    labels = {"node": node.name}
    if data.get("hccs_loss_pct") is not None:
        obs["node.hccs_loss_pct"].append(
            Observation(node.name, float(data["hccs_loss_pct"]), labels=labels, **base)
        )
    _roce_observations(obs, node, data.get("roce") or [], base)
    engine_state = (data.get("engine") or {}).get("state")
    if engine_state:
        obs["node.engine_failed"].append(
            Observation(
                node.name,
                1.0 if engine_state == "exited" else 0.0,
                labels={**labels, "engine_state": engine_state},
                **base,
            )
        )


def _chip_observations(
    obs: dict[str, list[Observation]],
    node: Node,
    data: dict[str, Any],
    base: dict[str, Any],
) -> None:
    """Per chip: temperature, HBM use, health and HCCS loss, where the sample has them."""
    hccs = data.get("hccs") or {}
    for chip in data.get("chips") or []:
        key = f"{chip['npu']}.{chip['chip']}"
        target = f"{node.name}/npu{key}"
        labels = {"node": node.name, "npu": chip["npu"], "chip": chip["chip"]}
        if chip.get("temp_c") is not None:
            obs["chip.temp_c"].append(
                Observation(target, float(chip["temp_c"]), labels=labels, **base)
            )
        if chip.get("hbm_used_mb") is not None and chip.get("hbm_total_mb"):
            pct = 100.0 * chip["hbm_used_mb"] / chip["hbm_total_mb"]
            obs["chip.hbm_used_pct"].append(
                Observation(target, pct, labels=labels, **base)
            )
        if chip.get("health"):
            bad = 0.0 if str(chip["health"]).upper() == "OK" else 1.0
            obs["chip.health_bad"].append(
                Observation(target, bad, labels=labels, **base)
            )
        loss = (hccs.get(key) or {}).get("loss_pct")
        if loss is not None:
            obs["chip.hccs_loss_pct"].append(
                Observation(target, float(loss), labels=labels, **base)
            )


def _roce_observations(
    obs: dict[str, list[Observation]],
    node: Node,
    roce: list[dict[str, Any]],
    base: dict[str, Any],
) -> None:
    """The node's count of bad RoCE ports, then each port (nothing when none was sampled)."""
    if not roce:
        return
    labels = {"node": node.name}
    bad_ports = [p for p in roce if _roce_bad(p)]
    obs["node.roce_down"].append(
        Observation(
            node.name,
            float(len(bad_ports)),
            labels={
                **labels,
                "ports": ",".join(str(p["npu"]) for p in bad_ports),
            },
            **base,
        )
    )
    for port in roce:
        obs["nic.roce_down"].append(
            Observation(
                f"{node.name}/roce{port['npu']}",
                1.0 if _roce_bad(port) else 0.0,
                labels={**labels, "npu": port["npu"], "link": port.get("link")},
                **base,
            )
        )


def _unreachable_observations(
    obs: dict[str, list[Observation]], *, now: datetime, interval: float
) -> None:
    """Per node in service that was ever seen: collection rounds missed since."""
    for node in Node.objects.exclude(last_seen_at=None).exclude(
        state=NodeState.OUT_OF_SERVICE
    ):
        assert node.last_seen_at is not None  # excluded above
        missed = max(0.0, (now - node.last_seen_at).total_seconds() / interval)
        obs["node.unreachable"].append(
            Observation(
                node.name,
                float(int(missed)),
                cluster_id=node.cluster_id,
                node_id=node.pk,
                labels={"node": node.name},
                at=node.last_seen_at,
            )
        )


def _engine_observations(
    obs: dict[str, list[Observation]], *, now: datetime, interval: float
) -> None:
    """The engines' latest samples (a cluster's whole, then each DP rank), then health per cluster."""
    clusters = {c.pk: c.name for c in Cluster.objects.only("pk", "name")}
    for (cluster_id, engine), s in _engine_samples_latest(
        now=now, interval=interval
    ).items():
        name = clusters.get(cluster_id, str(cluster_id))
        if engine == "all":
            _cluster_engine_observations(obs, name, s)
        else:
            _rank_observations(obs, name, engine, s)
    _health_observations(obs, now=now)


def _engine_samples_latest(
    *, now: datetime, interval: float
) -> dict[tuple[int, str], EngineSample]:
    """The newest sample per (cluster, engine) of the last few rounds."""
    latest: dict[tuple[int, str], EngineSample] = {}
    # Rows of the last few rounds only; the newest per (cluster, engine) wins.
    for sample in EngineSample.objects.filter(
        ts__gte=now - timedelta(seconds=3 * interval + 1)
    ).order_by("ts"):
        latest[(sample.cluster_id, sample.engine)] = sample
    return latest


def _cluster_engine_observations(
    obs: dict[str, list[Observation]], name: str, s: EngineSample
) -> None:
    """A cluster's engine as a whole: latency, queue, KV cache, stalls, preemption."""
    base: dict[str, Any] = {"cluster_id": s.cluster_id, "at": s.ts}
    labels = {"cluster": name}
    pairs = {
        "engine.ttft_p99_ms": None if s.ttft_p99 is None else s.ttft_p99 * 1000.0,
        "engine.e2e_p99_ms": None if s.e2e_p99 is None else s.e2e_p99 * 1000.0,
        "engine.waiting": s.waiting,
        "engine.kv_cache_pct": s.kv_cache_pct,
        # requests in flight but no generated token over the window: stuck
        "engine.stalled": (
            None
            if s.gen_tps is None
            else (1.0 if s.running >= 1 and s.gen_tps <= 0 else 0.0)
        ),
        "engine.kv_cache_pct_preempting": (
            None
            if s.kv_cache_pct is None
            else (s.kv_cache_pct if (s.preemptions or 0) > 0 else 0.0)
        ),
    }
    for metric, value in pairs.items():
        if value is not None:
            obs[metric].append(Observation(name, float(value), labels=labels, **base))


def _rank_observations(
    obs: dict[str, list[Observation]], name: str, engine: str, s: EngineSample
) -> None:
    """One DP rank's engine: its queue and KV cache."""
    base: dict[str, Any] = {"cluster_id": s.cluster_id, "at": s.ts}
    labels = {"cluster": name, "engine": engine}
    target = f"{name}/dp{engine}"
    obs["engine.rank_waiting"].append(
        Observation(target, float(s.waiting), labels=labels, **base)
    )
    if s.kv_cache_pct is not None:
        obs["engine.rank_kv_cache_pct"].append(
            Observation(target, float(s.kv_cache_pct), labels=labels, **base)
        )


def _health_observations(obs: dict[str, list[Observation]], *, now: datetime) -> None:
    """Per serving cluster: the gateway's engine errors and whether this round's health scrape failed."""
    scraped = {
        s.cluster_id: (s.scraped_at, s.health_ok) for s in ScrapeState.objects.all()
    }
    gateway_errors = _gateway_errors()
    for cluster in Cluster.objects.filter(state__in=HEALTH_WATCHED):
        if gateway_errors is not None:
            obs["engine.gateway_errors"].append(
                Observation(
                    cluster.name,
                    float(gateway_errors.get(cluster.pk, 0)),
                    cluster_id=cluster.pk,
                    labels={"cluster": cluster.name},
                    at=now,
                )
            )
        last, health_ok = scraped.get(cluster.pk, (None, False))
        # This round's scrape starts after the round's own time: older means it failed.
        failing = last is None or last < now - timedelta(seconds=0.5) or not health_ok
        obs["engine.health_failing"].append(
            Observation(
                cluster.name,
                1.0 if failing else 0.0,
                cluster_id=cluster.pk,
                labels={"cluster": cluster.name},
                at=last,
            )
        )


def alert_list(
    *, state: str | None = None, severity: str | None = None, cluster: str | None = None
) -> QuerySet[Alert]:
    """Alerts newest first, optionally filtered; state "active" = pending, firing or acknowledged."""
    qs = Alert.objects.select_related("rule", "cluster", "node", "acknowledged_by")
    if state == "active":
        qs = qs.filter(state__in=ACTIVE_STATES)
    elif state:
        qs = qs.filter(state=state)
    if severity:
        qs = qs.filter(severity=severity)
    if cluster:
        qs = qs.filter(cluster__name=cluster)
    return qs


def firing_critical_count() -> int:
    """Firing (not acknowledged, not silenced) critical alerts: the banner's one query."""
    return Alert.objects.filter(
        state=AlertState.FIRING, severity=Severity.CRITICAL, silenced=False
    ).count()


def firing_counts() -> dict[str, int]:
    """Firing (not acknowledged, not silenced) alerts by severity, in one query:
    ``{"critical": n, "warning": m}`` for the banner and the navigation's count."""
    return Alert.objects.filter(state=AlertState.FIRING, silenced=False).aggregate(
        critical=Count("pk", filter=Q(severity=Severity.CRITICAL)),
        warning=Count("pk", filter=Q(severity=Severity.WARNING)),
    )
