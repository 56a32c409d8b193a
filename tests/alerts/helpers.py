"""Builders for alert tests: rounds of real-format agent samples through ``ingest_round``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.models import Node
from monitoring.ingest import NodeResult, ingest_round
from tests.monitoring.samples import agent_sample


def ingest(
    node: Node,
    at: datetime,
    *,
    advance: dict[int, tuple[int, int, int]] | None = None,
    temp: float | None = None,
    roce_down: int | None = None,
) -> None:
    """One round of one node; ``advance`` moves HCCS counters (see samples.agent_sample)."""
    sample: dict[str, Any] = agent_sample(node.name, advance=advance)
    if temp is not None:
        sample["chips"][3]["temp_c"] = temp
    if roce_down is not None:
        sample["roce"][roce_down]["link"] = "DOWN"
    ingest_round(nodes=[NodeResult(node.pk, sample=sample)], scrapes=[], started_at=at)
