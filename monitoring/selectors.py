"""Read queries for collection, dashboards, chart windows and the exporter."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from console.models import Cluster, ClusterState, Node, NodeRole, NodeState
from monitoring.models import (
    ChipSample,
    EngineSample,
    NodeLatest,
    NodeSample,
    Rollup,
    SampleError,
)
from monitoring.models.alerts import ACTIVE_STATES as ALERT_ACTIVE_STATES
from monitoring.models.alerts import Alert

RAW_MAX_S = (
    3600  # windows up to 1 h read raw samples; longer ones read 1-minute rollups
)
MAX_POINTS = 1500  # per series, after server-side downsampling
RANGES = {"15m": 900, "1h": 3600, "6h": 21600, "24h": 86400}
ENGINE_CHART_FIELDS = (
    "running",
    "waiting",
    "ttft_p50",
    "ttft_p99",
    "itl_p50",
    "itl_p99",
    "gen_tps",
    "prompt_tps",
    "kv_cache_pct",
)
SERVING_STATES = (
    ClusterState.RUNNING,
    ClusterState.DEGRADED,
    ClusterState.STARTING,
    ClusterState.DRAINING,
)


@dataclass
class CollectTarget:
    pk: int
    name: str
    agent_queue: str
    model_path: str | None
    # never detected (a node added before server-model detection, or never
    # preflighted): its next collect also detects it (issue 13)
    detect_model: bool = False


@dataclass
class Targets:
    nodes: list[CollectTarget] = field(default_factory=list)
    scrapes: list[tuple[int, str]] = field(
        default_factory=list
    )  # (cluster id, /metrics URL)


def metrics_url(node: Node) -> str:
    host = (
        f"[{node.management_ip}]" if ":" in node.management_ip else node.management_ip
    )
    return f"http://{host}:{node.api_port}/metrics"


def collect_targets() -> Targets:
    """Every node (one node.collect each), and the /metrics URL of every cluster that serves.

    A cluster serves when its state says so or its head reported a running engine
    in the last round (an engine started outside an operation still gets charts).
    """
    targets = Targets()
    for node in Node.objects.select_related("cluster__profile").order_by("pk"):
        model_path = node.cluster.profile.model_path if node.cluster else None
        targets.nodes.append(
            CollectTarget(
                node.pk,
                node.name,
                node.agent_queue,
                model_path,
                detect_model=not node.detected_server_model,
            )
        )
        if node.cluster is not None and node.role == NodeRole.HEAD:
            if node.cluster.state in SERVING_STATES or node.state == NodeState.RUNNING:
                targets.scrapes.append((node.cluster.pk, metrics_url(node)))
    return targets


def dashboard_nodes(cluster: Cluster) -> list[dict[str, Any]]:
    """Member nodes in rank order with their latest sample summary (for cards and the heatmap)."""
    nodes = cluster.ranked_nodes()
    latest = {
        lt.node_id: lt
        for lt in NodeLatest.objects.filter(node_id__in=[n.pk for n in nodes])
    }
    since = timezone.now() - timedelta(minutes=15)
    err_counts: dict[int, int] = defaultdict(int)
    for node_id in SampleError.objects.filter(
        node_id__in=[n.pk for n in nodes], ts__gte=since
    ).values_list("node_id", flat=True):
        err_counts[node_id] += 1
    alert_counts: dict[int, int] = defaultdict(int)
    for node_id in Alert.objects.filter(
        node_id__in=[n.pk for n in nodes], state__in=ALERT_ACTIVE_STATES
    ).values_list("node_id", flat=True):
        alert_counts[node_id] += 1
    out = []
    for node in nodes:
        lt = latest.get(node.pk)
        data = lt.data if lt else {}
        chips = []
        for c in data.get("chips", []):
            hbm = (
                100.0 * c["hbm_used_mb"] / c["hbm_total_mb"]
                if c.get("hbm_used_mb") is not None and c.get("hbm_total_mb")
                else None
            )
            chips.append({**c, "hbm_pct": hbm})
        out.append(
            {
                "node": node,
                "chips": chips,
                "ts": lt.ts if lt else None,
                "engine": data.get("engine") or {},
                "hccs_loss_pct": data.get("hccs_loss_pct"),
                # measured / no_traffic / unsupported ... (engine/link_loss.py)
                "hccs_loss_state": data.get("hccs_loss_state"),
                "errors_15m": err_counts[node.pk],
                "alerts_active": alert_counts[node.pk],
                "stale": node.state in (NodeState.STALE, NodeState.UNREACHABLE),
            }
        )
    return out


def _downsample(
    ts: list[float], columns: dict[str, list[float | None]], max_points: int
) -> tuple[list[float], dict[str, list[float | None]]]:
    """Average consecutive points into at most ``max_points`` buckets (keeps spikes visible via the mean of the bucket)."""
    n = len(ts)
    if n <= max_points:
        return ts, columns
    step = -(-n // max_points)
    out_ts = [ts[i] for i in range(0, n, step)]
    out: dict[str, list[float | None]] = {}
    for key, values in columns.items():
        col: list[float | None] = []
        for i in range(0, n, step):
            chunk = [v for v in values[i : i + step] if v is not None]
            col.append(sum(chunk) / len(chunk) if chunk else None)
        out[key] = col
    return out_ts, out


def _align(
    rows: list[tuple[datetime, str, float | None]],
) -> tuple[list[float], dict[str, list[float | None]]]:
    """(time, series, value) rows → one shared x axis and one column per series (None where missing)."""
    times = sorted({r[0] for r in rows})
    index = {t: i for i, t in enumerate(times)}
    cols: dict[str, list[float | None]] = {}
    for t, key, value in rows:
        col = cols.setdefault(key, [None] * len(times))
        col[index[t]] = value
    return [t.timestamp() for t in times], cols


def engine_series(
    cluster: Cluster, start: datetime, *, use_rollups: bool, engine: str = "all"
) -> dict[str, Any]:
    """Cluster serving figures (queue, latencies, throughput, KV cache) from ``start`` on."""
    rows: list[tuple[datetime, str, float | None]] = []
    raw_from = start
    if use_rollups:
        for r in Rollup.objects.filter(
            cluster=cluster, key=engine, series__startswith="engine.", minute__gte=start
        ).values_list("minute", "series", "avg"):
            rows.append((r[0], r[1][len("engine.") :], r[2]))
        if rows:
            raw_from = max(r[0] for r in rows) + timedelta(minutes=1)
    qs: QuerySet[EngineSample] = EngineSample.objects.filter(
        cluster=cluster, engine=engine, ts__gte=raw_from
    ).order_by("ts")
    for values in qs.values_list("ts", *ENGINE_CHART_FIELDS):
        for name, value in zip(ENGINE_CHART_FIELDS, values[1:], strict=True):
            rows.append((values[0], name, value))
    ts, cols = _align(rows)
    ts, cols = _downsample(ts, cols, MAX_POINTS)
    return {"t": ts, **{f: cols.get(f, [None] * len(ts)) for f in ENGINE_CHART_FIELDS}}


# Rollup series the node charts read → their column prefix.
ROLLUP_NAMES = {
    "chip.temp_c": "temp",
    "chip.hbm_pct": "hbm",
    "chip.power_w": "power",
    "chip.hccs_loss_pct": "chiploss",
    "node.hccs_loss_pct": "loss",
    "node.roce_down": "roce_down",
}


def node_series(node: Node, start: datetime, *, use_rollups: bool) -> dict[str, Any]:
    """Per chip: temperature, HBM %, power and HCCS loss (its worst link); per node: the
    worst HCCS loss and the RoCE ports down; from ``start`` on."""
    rows: list[tuple[datetime, str, float | None]] = []
    raw_from = start
    if use_rollups:
        for minute, series, key, avg in Rollup.objects.filter(
            node=node,
            minute__gte=start,
            series__in=tuple(ROLLUP_NAMES),
        ).values_list("minute", "series", "key", "avg"):
            name = ROLLUP_NAMES[series]
            rows.append((minute, f"{name}:{key}" if key else name, avg))
        if rows:
            raw_from = max(r[0] for r in rows) + timedelta(minutes=1)
    for ts, npu, chip, temp, used, total, power, chip_loss in ChipSample.objects.filter(
        node=node, ts__gte=raw_from
    ).values_list(
        "ts",
        "npu",
        "chip",
        "temp_c",
        "hbm_used_mb",
        "hbm_total_mb",
        "power_w",
        "hccs_loss_pct",
    ):
        rows.append((ts, f"temp:{npu}.{chip}", temp))
        rows.append((ts, f"power:{npu}.{chip}", power))
        rows.append((ts, f"chiploss:{npu}.{chip}", chip_loss))
        rows.append(
            (
                ts,
                f"hbm:{npu}.{chip}",
                100.0 * used / total if used is not None and total else None,
            )
        )
    for ts, loss, roce_down in NodeSample.objects.filter(
        node=node, ts__gte=raw_from
    ).values_list("ts", "hccs_loss_pct", "roce_down"):
        rows.append((ts, "loss", loss))
        rows.append((ts, "roce_down", float(roce_down)))
    t, cols = _align(rows)
    t, cols = _downsample(t, cols, MAX_POINTS)
    chips = sorted(
        {k.split(":", 1)[1] for k in cols if k.startswith("temp:")},
        key=lambda k: tuple(int(p) for p in k.split(".")),
    )
    return {
        "t": t,
        "chips": chips,
        "temp": [cols[f"temp:{c}"] for c in chips],
        "hbm": [cols.get(f"hbm:{c}", [None] * len(t)) for c in chips],
        "loss": cols.get("loss", [None] * len(t)),
        "power": [cols.get(f"power:{c}", [None] * len(t)) for c in chips],
        "chip_loss": [cols.get(f"chiploss:{c}", [None] * len(t)) for c in chips],
        "roce_down": cols.get("roce_down", [None] * len(t)),
    }


def chart_window(
    cluster: Cluster, *, range_s: int, node: Node | None, since: float | None = None
) -> dict[str, Any]:
    """Everything the dashboard charts need for one window; ``since`` (epoch) narrows it to a backfill."""
    now = timezone.now()
    start = now - timedelta(seconds=range_s)
    use_rollups = range_s > RAW_MAX_S
    if since is not None:
        start = max(
            start,
            datetime.fromtimestamp(since, tz=now.tzinfo) + timedelta(microseconds=1),
        )
        use_rollups = use_rollups and (now - start).total_seconds() > RAW_MAX_S
    return {
        "range_s": range_s,
        "source": "rollup" if use_rollups else "raw",
        "now": now.timestamp(),
        "engine": engine_series(cluster, start, use_rollups=use_rollups),
        "node": node.name if node else None,
        "node_series": node_series(node, start, use_rollups=use_rollups)
        if node
        else None,
    }


def latest_for_export() -> list[tuple[Node, NodeLatest]]:
    """Every node's latest sample with its node (and cluster) for the exporter."""
    latest = NodeLatest.objects.select_related("node__cluster").order_by("node__name")
    return [(lt.node, lt) for lt in latest]
