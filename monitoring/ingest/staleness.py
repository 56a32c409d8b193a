"""Nodes that went silent: ready/running → stale → unreachable by conditional UPDATEs."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from console.models import Node, NodeState


def node_staleness_update(*, now: datetime | None = None) -> dict[str, str]:
    """Mark nodes without a sample for STALE_AFTER_S stale and for UNREACHABLE_AFTER_S unreachable.

    Conditional UPDATEs only move nodes forward (ready/running → stale → unreachable);
    out-of-service and never-seen nodes are left alone. Returns {node name: new state}.
    """
    now = now or timezone.now()
    changed: dict[str, str] = {}
    steps = (
        (
            NodeState.UNREACHABLE,
            timedelta(seconds=settings.UNREACHABLE_AFTER_S),
            (NodeState.READY, NodeState.RUNNING, NodeState.STALE, NodeState.UNKNOWN),
        ),
        (
            NodeState.STALE,
            timedelta(seconds=settings.STALE_AFTER_S),
            (NodeState.READY, NodeState.RUNNING, NodeState.UNKNOWN),
        ),
    )
    for state, after, from_states in steps:
        qs = Node.objects.filter(last_seen_at__lt=now - after, state__in=from_states)
        names = list(qs.values_list("name", flat=True))
        if names:
            Node.objects.filter(name__in=names, state__in=from_states).update(
                state=state
            )
            changed.update(dict.fromkeys(names, str(state)))
    return changed
