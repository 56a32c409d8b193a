"""Prometheus exposition of the latest NPU/link values (npu-exporter names and labels) and the console's own health.

Names and label keys follow Huawei MindCluster npu-exporter (reference/ascend-facts.md §5):
``npu_chip_info_*`` with ``id``, ``model_name``, ``pcie_bus_info`` (plus ``vdie_id``,
``namespace``, ``pod_name``, ``container_name`` empty as on a bare-metal host), and
``node``, ``cluster``, ``rank`` added so one console can expose many servers.
"""

from __future__ import annotations

from collections import Counter as TallyCounter
from collections.abc import Callable, Iterable, Iterator
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


def _net_value(net: Any) -> int:
    """npu-exporter's network health: 1 success, 0 anything else, -1 not reported."""
    return -1 if net is None else (1 if str(net).lower() == "success" else 0)


# (family, help, value from one chip's sample) per chip, in exposition order;
# a None value adds no sample
CHIP_FAMILIES: tuple[tuple[str, str, Callable[[dict[str, Any]], Any]], ...] = (
    ("npu_chip_info_temperature", "the npu temperature", lambda c: c.get("temp_c")),
    ("npu_chip_info_power", "the npu power", lambda c: c.get("power_w")),
    (
        "npu_chip_info_hbm_used_memory",
        "the npu hbm used memory",
        lambda c: c.get("hbm_used_mb"),
    ),
    (
        "npu_chip_info_hbm_total_memory",
        "the npu hbm total memory",
        lambda c: c.get("hbm_total_mb"),
    ),
    (
        "npu_chip_info_utilization",
        "the ai core utilization",
        lambda c: c.get("aicore_pct"),
    ),
    (
        "npu_chip_info_health_status",
        "the npu health status",
        lambda c: health_value(c.get("health")),
    ),
)
# the same from the chip's RoCE port (chip 0 of an NPU), before its counters
PORT_FAMILIES: tuple[tuple[str, str, Callable[[dict[str, Any]], Any]], ...] = (
    (
        "npu_chip_info_link_status",
        "the npu link status",
        lambda p: _link_value(p.get("link")),
    ),
    (
        "npu_chip_info_network_status",
        "the npu network health status",
        lambda p: _net_value(p.get("net_health")),
    ),
    ("npu_chip_link_up_num", "the npu link up num", lambda p: p.get("up_count")),
)
# (family, help) of each HCCS link's tx, rx and crc error count; the name ends _<link>
HCCS_LINK_FAMILIES = (
    ("npu_chip_info_hccs_statistic_info_tx_cnt", "the hccs tx packet count"),
    ("npu_chip_info_hccs_statistic_info_rx_cnt", "the hccs rx packet count"),
    ("npu_chip_info_hccs_statistic_info_crc_err_cnt", "the hccs crc error count"),
)


class TelemetryCollector(Collector):
    """Yields metric families from the database on every scrape (no global state)."""

    def collect(self) -> Iterator[Metric]:
        yield from _npu_families()
        yield from _console_families()

    def describe(self) -> Iterable[Metric]:
        return []


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class _ChipGauges:
    """The per-chip families, each created at its first sample: first seen, first exposed."""

    def __init__(self) -> None:
        self.families: dict[str, GaugeMetricFamily] = {}

    def add(self, name: str, doc: str, labels: list[str], value: float | None) -> None:
        """One chip's sample of family ``name``; None adds nothing."""
        if value is None:
            return
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = _gauge(name, doc, CHIP_LABELS)
        fam.add_metric(labels, float(value))


def _npu_families() -> Iterator[Metric]:
    """Per node: the NPU count and HCCS loss state; per chip: the npu-exporter families."""
    gauges = _ChipGauges()
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
        _add_node_chips(gauges, node, data, chips, cluster=cluster, rank=rank)
    yield machine
    yield loss_state
    yield from gauges.families.values()


def _add_node_chips(
    gauges: _ChipGauges,
    node: Node,
    data: dict[str, Any],
    chips: list[dict[str, Any]],
    *,
    cluster: str,
    rank: str,
) -> None:
    """Every chip's samples of one node: its own values, its RoCE port's, its HCCS links'."""
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
        for name, doc, value_of in CHIP_FAMILIES:
            gauges.add(name, doc, labels, value_of(c))
        port = roce.get(c["npu"]) if c["chip"] == 0 else None
        if port is not None:
            _add_port(gauges, labels, port)
        h = hccs.get(f"{c['npu']}.{c['chip']}")
        if h is not None:
            _add_hccs(gauges, labels, h)


def _add_port(gauges: _ChipGauges, labels: list[str], port: dict[str, Any]) -> None:
    """A chip's RoCE port: link, network health, link-up count, then each counter."""
    for name, doc, value_of in PORT_FAMILIES:
        gauges.add(name, doc, labels, value_of(port))
    for counter, value in sorted((port.get("stat") or {}).items()):
        gauges.add(
            f"npu_chip_{counter}", f"the npu {counter.replace('_', ' ')}", labels, value
        )


def _add_hccs(gauges: _ChipGauges, labels: list[str], h: dict[str, Any]) -> None:
    """A chip's HCCS links (tx, rx, crc errors per link, npu-exporter's at most 8), then its loss."""
    for index, (tx, rx, _retry, err) in enumerate(h["links"][:MAX_HCCS_LINKS]):
        for (name, doc), value in zip(HCCS_LINK_FAMILIES, (tx, rx, err), strict=True):
            gauges.add(f"{name}_{index}", doc, labels, value)
    gauges.add(
        "console_hccs_loss_percent",
        "Worst HCCS link's (Δretries+Δerrors)/Δtx over the last window, percent.",
        labels,
        h.get("loss_pct"),
    )


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
