"""The npu-exporter families: per node the NPU count and HCCS loss state, per chip its
readings, its RoCE port's and its HCCS links', under npu-exporter's names and labels.
Separate from the console's own health (``health.py``): this half follows Huawei's
exporter and reads only the nodes' latest samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from console.models import Node
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
