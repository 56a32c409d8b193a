"""What the live pages see: the channel groups of an operation and of a cluster, and
the pushes of an operation's progress and of a cluster's state change.

Separate because the consumers and the playground only need the group names, and the
lifecycle and the runbooks push through the same two functions.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import transaction
from django.utils import timezone

from console.live import publish
from console.models import Cluster, ClusterState
from console.models.operations import Operation, OperationStep


def operation_group(operation_id: int) -> str:
    return f"operation-{operation_id}"


def cluster_group(cluster_id: int) -> str:
    return f"cluster-{cluster_id}"


def cluster_set_state(cluster: Cluster, state: str) -> None:
    """Record and push a cluster state change."""
    if cluster.state == state:
        return
    Cluster.objects.filter(pk=cluster.pk).update(
        state=state, state_changed_at=timezone.now()
    )
    cluster.state = state
    label = str(ClusterState(state).label)
    transaction.on_commit(
        lambda: publish(
            cluster_group(cluster.pk),
            "cluster.state",
            {
                "cluster": cluster.pk,
                "state": state,
                "label": label,
                "color": cluster.state_color,
            },
        )
    )


def operation_publish(op: Operation, step: OperationStep | None = None) -> None:
    """Push the operation's state (and a changed step) to its page and its cluster's page."""
    done, total = op.progress()
    payload: dict[str, Any] = {
        "operation": op.pk,
        "cluster": op.cluster_id,
        "kind": op.kind,
        "state": op.state,
        "state_label": str(op.get_state_display()),
        "color": op.state_color,
        "error": op.error,
        "progress": [done, total],
        "duration_s": op.duration_s,
    }
    if step is not None:
        payload["step"] = step.to_dict()
    for group in (operation_group(op.pk), cluster_group(op.cluster_id)):
        transaction.on_commit(
            functools.partial(publish, group, "operation.progress", payload)
        )
