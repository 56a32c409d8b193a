"""``SampleError`` rows: what a round could not read, kept with its raw text."""

from __future__ import annotations

from datetime import datetime

from console.models import Node
from monitoring.models import SampleError

RAW_KEEP = 4000


def _err(
    ts: datetime,
    source: str,
    message: str,
    raw: str = "",
    *,
    node: Node | None = None,
    cluster_id: int | None = None,
) -> SampleError:
    return SampleError(
        ts=ts,
        node=node,
        cluster_id=cluster_id if node is None else node.cluster_id,
        source=source[:200],
        message=message,
        raw=raw[:RAW_KEEP],
    )
