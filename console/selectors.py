"""Read queries shared by views, the API and commands."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.db.models import Prefetch, QuerySet

from console.models import Cluster, ClusterState, Node, NodeRole, NodeState
from console.signals import ask, critical_alerts_asked, latest_sample_asked


def cluster_list() -> QuerySet[Cluster]:
    """Clusters with profile and member nodes (rank order) in three queries."""
    members = Node.objects.exclude(role=NodeRole.SPARE).order_by("rank")
    return Cluster.objects.select_related("profile").prefetch_related(
        Prefetch("nodes", queryset=members)
    )


def spare_list() -> QuerySet[Node]:
    """Idle spares (in no cluster) that can take a failing node's rank."""
    return Node.objects.filter(role=NodeRole.SPARE, cluster__isnull=True).order_by(
        "name"
    )


def spare_for(node: Node) -> Node | None:
    """An idle spare of the same hardware (in no cluster, ready, same NPU model/count/HBM)."""
    return (
        spare_list()
        .filter(
            npu_model=node.npu_model,
            npu_count=node.npu_count,
            hbm_per_npu_gb=node.hbm_per_npu_gb,
        )
        .exclude(
            state__in=(NodeState.OUT_OF_SERVICE, NodeState.UNREACHABLE, NodeState.STALE)
        )
        .exclude(pk=node.pk)
        .first()
    )


def standby_for(cluster: Cluster) -> Cluster | None:
    """A stopped cluster serving the same model, not in maintenance."""
    return (
        Cluster.objects.filter(
            profile__served_model_name=cluster.profile.served_model_name,
            state=ClusterState.STOPPED,
            maintenance_mode=False,
        )
        .exclude(pk=cluster.pk)
        .order_by("name")
        .first()
    )


def cluster_critical_alerts(cluster: Cluster) -> list[tuple[str, str]]:
    """Firing, unsilenced critical alerts of ``cluster`` as (target, rule name), at most 3."""
    answer = ask(critical_alerts_asked, Cluster, cluster=cluster)
    return cast(list[tuple[str, str]], answer or [])


def node_latest_sample(node: Node) -> tuple[datetime, dict[str, Any]] | None:
    """The node's latest collected sample as (time, data); None before the first one."""
    return cast(
        "tuple[datetime, dict[str, Any]] | None",
        ask(latest_sample_asked, Node, node=node),
    )
