"""Prometheus exposition of the latest NPU/link values (npu-exporter names and labels) and the console's own health.

Names and label keys follow Huawei MindCluster npu-exporter (reference/ascend-facts.md §5):
``npu_chip_info_*`` with ``id``, ``model_name``, ``pcie_bus_info`` (plus ``vdie_id``,
``namespace``, ``pod_name``, ``container_name`` empty as on a bare-metal host), and
``node``, ``cluster``, ``rank`` added so one console can expose many servers.
"""

from __future__ import annotations

from collections import Counter as TallyCounter
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db.models import Count
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from console.gateway.upstream_errors import upstream_errors_total
from console.models import Cluster, Node
from monitoring.models import CollectRound, EngineSample, SampleError
from monitoring.selectors import latest_for_export

CHIP_LABELS = [
    "id",
    "model_name",
    "pcie_bus_info",
    "vdie_id",
    "namespace",
    "pod_name",
    "container_name",
    "node",
    "cluster",
    "rank",
]
HEALTHY = {"OK"}
UNKNOWN = {"", "UNKNOWN", "NA"}
MAX_HCCS_LINKS = 8  # npu-exporter's MaxHccsNum: _0 … _7
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


def health_value(health: str | None) -> int:
    """npu-exporter convention: 1 healthy, 0 unhealthy, -1 unknown."""
    value = (health or "").strip().upper()
    if value in HEALTHY:
        return 1
    if value in UNKNOWN:
        return -1
    return 0


def _link_value(link: str | None) -> int:
    return {"UP": 1, "DOWN": 0}.get((link or "").upper(), -1)


class TelemetryCollector(Collector):
    """Yields metric families from the database on every scrape (no global state)."""

    def collect(self) -> Iterator[Metric]:
        yield from _npu_families()
        yield from _console_families()

    def describe(self) -> Iterable[Metric]:
        return []


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _npu_families() -> Iterator[Metric]:
    g: dict[str, GaugeMetricFamily] = {}

    def add(name: str, doc: str, labels: list[str], value: float | None) -> None:
        if value is None:
            return
        fam = g.get(name)
        if fam is None:
            fam = g[name] = _gauge(name, doc, CHIP_LABELS)
        fam.add_metric(labels, float(value))

    machine = _gauge(
        "machine_npu_nums",
        "Amount of npu installed on the machine.",
        ["node", "cluster"],
    )
    loss_state = _gauge(
        "console_hccs_loss_state",
        "1 for the node's HCCS loss state: measured, no_traffic (nothing sent, loss "
        "cannot be measured), unsupported, no_baseline or reset.",
        ["node", "cluster", "state"],
    )
    for node, latest in latest_for_export():
        data: dict[str, Any] = latest.data
        cluster = node.cluster.name if node.cluster else ""
        if data.get("hccs_loss_state"):
            loss_state.add_metric(
                [node.name, cluster, str(data["hccs_loss_state"])], 1.0
            )
        rank = "" if node.rank is None else str(node.rank)
        chips = sorted(data.get("chips", []), key=lambda c: (c["npu"], c["chip"]))
        machine.add_metric([node.name, cluster], float(len({c["npu"] for c in chips})))
        roce = {p["npu"]: p for p in data.get("roce", [])}
        hccs = data.get("hccs", {})
        for logical_id, c in enumerate(chips):
            labels = [
                str(logical_id),
                c.get("name") or node.npu_model,
                c.get("bus_id") or "",
                "",
                "",
                "",
                "",
                node.name,
                cluster,
                rank,
            ]
            add(
                "npu_chip_info_temperature",
                "the npu temperature",
                labels,
                c.get("temp_c"),
            )
            add("npu_chip_info_power", "the npu power", labels, c.get("power_w"))
            add(
                "npu_chip_info_hbm_used_memory",
                "the npu hbm used memory",
                labels,
                c.get("hbm_used_mb"),
            )
            add(
                "npu_chip_info_hbm_total_memory",
                "the npu hbm total memory",
                labels,
                c.get("hbm_total_mb"),
            )
            add(
                "npu_chip_info_utilization",
                "the ai core utilization",
                labels,
                c.get("aicore_pct"),
            )
            add(
                "npu_chip_info_health_status",
                "the npu health status",
                labels,
                health_value(c.get("health")),
            )
            port = roce.get(c["npu"]) if c["chip"] == 0 else None
            if port is not None:
                add(
                    "npu_chip_info_link_status",
                    "the npu link status",
                    labels,
                    _link_value(port.get("link")),
                )
                net = port.get("net_health")
                add(
                    "npu_chip_info_network_status",
                    "the npu network health status",
                    labels,
                    -1 if net is None else (1 if str(net).lower() == "success" else 0),
                )
                if port.get("up_count") is not None:
                    add(
                        "npu_chip_link_up_num",
                        "the npu link up num",
                        labels,
                        port["up_count"],
                    )
                for counter, value in sorted((port.get("stat") or {}).items()):
                    add(
                        f"npu_chip_{counter}",
                        f"the npu {counter.replace('_', ' ')}",
                        labels,
                        value,
                    )
            h = hccs.get(f"{c['npu']}.{c['chip']}")
            if h is not None:
                for index, (tx, rx, _retry, err) in enumerate(
                    h["links"][:MAX_HCCS_LINKS]
                ):
                    add(
                        f"npu_chip_info_hccs_statistic_info_tx_cnt_{index}",
                        "the hccs tx packet count",
                        labels,
                        tx,
                    )
                    add(
                        f"npu_chip_info_hccs_statistic_info_rx_cnt_{index}",
                        "the hccs rx packet count",
                        labels,
                        rx,
                    )
                    add(
                        f"npu_chip_info_hccs_statistic_info_crc_err_cnt_{index}",
                        "the hccs crc error count",
                        labels,
                        err,
                    )
                add(
                    "console_hccs_loss_percent",
                    "Worst HCCS link's (Δretries+Δerrors)/Δtx over the last window, percent.",
                    labels,
                    h.get("loss_pct"),
                )
    yield machine
    yield loss_state
    yield from g.values()


def _console_families() -> Iterator[Metric]:
    now = timezone.now()
    last = CollectRound.objects.order_by("-started_at").first()
    lag = _gauge(
        "console_ingest_lag_seconds",
        "Seconds since the last collection round finished ingesting.",
        [],
    )
    if last is not None:
        lag.add_metric([], max(0.0, (now - last.finished_at).total_seconds()))
    yield lag
    recent = list(
        CollectRound.objects.filter(
            started_at__gte=now - timedelta(minutes=1)
        ).values_list("rows", "ingest_ms")
    )
    rate = _gauge(
        "console_samples_per_second",
        "Sample rows ingested per second over the last minute.",
        [],
    )
    rate.add_metric([], sum(r for r, _ in recent) / 60.0)
    yield rate
    dur = _gauge(
        "console_ingest_duration_seconds",
        "Time the last round spent parsing and storing.",
        [],
    )
    if last is not None:
        dur.add_metric([], last.ingest_ms / 1000.0)
    yield dur
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
    yield states
    errors = _gauge(
        "console_sample_errors_15m",
        "Collection/parse errors recorded in the last 15 minutes.",
        [],
    )
    errors.add_metric(
        [],
        float(SampleError.objects.filter(ts__gte=now - timedelta(minutes=15)).count()),
    )
    yield errors
    yield _operations_family()
    yield _gateway_errors_family()
    yield from _engine_families(now)


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


def exposition() -> bytes:
    """The whole /metrics body (text format 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TelemetryCollector())
    return generate_latest(registry)
