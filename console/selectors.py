"""Read queries shared by views, the API and commands."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from console.models import Cluster, Node, NodeRole


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
