"""Read queries shared by views, the API and commands."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.db.models import Prefetch, QuerySet

from console.models import Cluster, ClusterState, Node, NodeRole, NodeState
from console.models.operations import (
    Operation,
    OperationKind,
    OperationState,
    OperationStep,
)
from console.signals import ask, critical_alerts_asked, latest_sample_asked
from engine import compat
from engine.capabilities import capability, remedies_for


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


def last_start_seconds(cluster: Cluster | None) -> float | None:
    """The cluster's last measured engine start: the duration of its latest succeeded
    start/restart/failover/replace operation (each restarts the engine); None if never."""
    if cluster is None:
        return None
    op = (
        Operation.objects.filter(
            cluster=cluster,
            state=OperationState.SUCCEEDED,
            kind__in=(
                OperationKind.START,
                OperationKind.RESTART,
                OperationKind.FAILOVER,
                OperationKind.REPLACE,
            ),
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-finished_at")
        .first()
    )
    if op is None or op.started_at is None or op.finished_at is None:
        return None
    return (op.finished_at - op.started_at).total_seconds()


def node_link_fault_plan(
    node: Node, *, last_start_s: float | None = None
) -> dict[str, Any]:
    """What the console will do about an HCCS link fault on ``node``, and why.

    For the node page and the API: the effective server model (site override, else
    detected at preflight, else unknown) with its source and evidence, the model's
    link capabilities, and the ordered remedies (engine.capabilities.remedies_for),
    each saying whether it can have an effect here and citing its sources. The
    expected downtime is ``last_start_s``, else the cluster's last measured start.
    """
    if last_start_s is None:
        last_start_s = last_start_seconds(node.cluster)
    model = node.effective_server_model
    cap = capability(model)
    spare = any(
        s.effective_server_model == model and model != "unknown"
        for s in spare_list()
        if s.pk != node.pk
    )
    return {
        "server_model": model,
        "server_model_label": cap.label,
        "source": node.server_model_source,
        "detected": node.detected_server_model or None,
        "detected_evidence": node.detected_server_model_evidence,
        "override_reason": node.server_model_override_reason,
        "capability": cap.to_dict(),
        "remedies": [
            r.to_dict()
            for r in remedies_for(
                model, spare_available=spare, last_start_s=last_start_s
            )
        ],
    }


RELEASE_CHECKS = (
    "release matrix",
    "model files",
    "same model files",
    "container engine",
    "container image",
    "npu devices free",
)


def node_release_status(node: Node) -> dict[str, Any]:
    """Driver, image, versions against the release matrix and the weights' state of
    ``node``, for the node page: the target is its cluster profile's vllm-ascend
    version; versions and checks are those of the node's latest preflight."""

    profile = node.cluster.profile if node.cluster is not None else None
    target = profile.vllm_ascend_version if profile else ""
    row = compat.release(target) if target else None
    family = capability(node.effective_server_model).family
    image = None
    if row and node.driver == Node.Driver.CONTAINER:
        image = compat.image(target, "a3" if family == "A3" else "a2")
    step = (
        OperationStep.objects.filter(node=node, name__startswith="Preflight checks on")
        .exclude(data={})
        .order_by("-pk")
        .first()
    )
    checks = [
        c
        for c in ((step.data or {}).get("checks") or [] if step else [])
        if c.get("name") in RELEASE_CHECKS
    ]
    return {
        "driver": node.driver,
        "image": image,
        "target": target or None,
        "needed": row.needed() if row else {},
        "matrix_commit": compat.source()["commit"][:12],
        "checks": checks,
        "checked_at": step.finished_at if step else None,
    }
