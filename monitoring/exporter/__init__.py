"""Prometheus exposition of the latest NPU/link values (npu-exporter names and labels) and the console's own health.

Names and label keys follow Huawei MindCluster npu-exporter (reference/ascend-facts.md §5):
``npu_chip_info_*`` with ``id``, ``model_name``, ``pcie_bus_info`` (plus ``vdie_id``,
``namespace``, ``pod_name``, ``container_name`` empty as on a bare-metal host), and
``node``, ``cluster``, ``rank`` added so one console can expose many servers.

The NPU families are in ``npu.py``, the console's own health (ingest, nodes, operations,
gateway, engines) in ``health.py``; this module joins them into one collector and body.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from monitoring.exporter.health import ENGINE_EXPORT, _console_families
from monitoring.exporter.npu import (
    CHIP_FAMILIES,
    CHIP_LABELS,
    HCCS_LINK_FAMILIES,
    HEALTHY,
    MAX_HCCS_LINKS,
    PORT_FAMILIES,
    UNKNOWN,
    _npu_families,
    health_value,
)

__all__ = [
    "CHIP_FAMILIES",
    "CHIP_LABELS",
    "ENGINE_EXPORT",
    "HCCS_LINK_FAMILIES",
    "HEALTHY",
    "MAX_HCCS_LINKS",
    "PORT_FAMILIES",
    "UNKNOWN",
    "TelemetryCollector",
    "exposition",
    "health_value",
]


class TelemetryCollector(Collector):
    """Yields metric families from the database on every scrape (no global state)."""

    def collect(self) -> Iterator[Metric]:
        yield from _npu_families()
        yield from _console_families()

    def describe(self) -> Iterable[Metric]:
        return []


def exposition() -> bytes:
    """The whole /metrics body (text format 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TelemetryCollector())
    return generate_latest(registry)
