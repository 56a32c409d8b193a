"""Preconditions with evidence: can this incident's remedy work on this node and cluster?

One check per remedy (failover needs healthy RoCE ports, replace an idle spare, restart
fewer failed automatic restarts than the limit, scale-out a stopped standby); each returns
why not and the evidence, which the caller escalates with. Separate from the guardrails,
which hold for every remedy, and from acting.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.models import Cluster, LinkMode, Node
from console.models.operations import Operation, OperationKind, OperationState
from console.selectors import spare_for, standby_for

# One definition of a healthy RoCE port for the alert rules and the failover precondition.
from monitoring.alerts.selectors import ROCE_OK_HEALTH
from monitoring.models import Incident, NodeLatest, RemediationAction
from monitoring.remediation.timeline import _note, _set


def roce_evidence(node: Node) -> tuple[bool, dict[str, Any]]:
    """Are all of ``node``'s RoCE ports UP with a healthy net_health, by the latest sample?"""
    latest = NodeLatest.objects.filter(node=node).first()
    ports = ((latest.data or {}).get("roce") or []) if latest else []
    bad = [
        {"npu": p.get("npu"), "link": p.get("link"), "net_health": p.get("net_health")}
        for p in ports
        if p.get("link") != "UP"
        or str(p.get("net_health") or "").lower() not in ROCE_OK_HEALTH
    ]
    ok = bool(ports) and not bad
    return ok, {
        "roce_ports": len(ports),
        "roce_bad": bad,
        "sampled_at": latest.ts.isoformat() if latest else None,
    }


def _failover_possible(
    incident: Incident, node: Node | None, cluster: Cluster
) -> tuple[str, dict[str, Any]] | None:
    """Failover: a node already on RoCE moves to the second remedy; else its RoCE ports must be healthy."""
    if node is None:
        return "failover needs a node-scoped alert", {}
    if node.link_mode == LinkMode.ROCE:
        _set(incident, action=RemediationAction.REPLACE)
        _note(
            incident,
            "next",
            f"{node.name} already runs on RoCE and still loses packets: moving to the second remedy",
        )
        return _precondition(incident)
    ok, evidence = roce_evidence(node)
    if not ok:
        ports = (
            ", ".join(
                f"NPU {p['npu']}: link {p['link']}, net_health {p['net_health']}"
                for p in evidence["roce_bad"]
            )
            or "no RoCE sample"
        )
        return (
            f"{node.name} loses HCCS packets but its RoCE ports are not healthy ({ports}): no failover restart",
            evidence,
        )
    return None


def _replace_possible(
    incident: Incident, node: Node | None, cluster: Cluster
) -> tuple[str, dict[str, Any]] | None:
    """Replace: an idle spare of the same hardware must exist."""
    if node is None:
        return "replacement needs a node-scoped alert", {}
    if spare_for(node) is None:
        return (
            f"no idle spare with {node.npu_count} × {node.npu_model} ({node.hbm_per_npu_gb} GB) to replace {node.name}",
            {},
        )
    return None


def _restart_possible(
    incident: Incident, node: Node | None, cluster: Cluster
) -> tuple[str, dict[str, Any]] | None:
    """Restart: fewer failed automatic restarts in the window than the limit."""
    window = timezone.now() - timedelta(seconds=settings.REMEDIATION_RESTART_WINDOW_S)
    tries = (
        Operation.objects.filter(
            cluster=cluster,
            kind=OperationKind.RESTART,
            source="automation",
            created_at__gte=window,
        )
        .exclude(state=OperationState.SUCCEEDED)
        .count()
    )
    if tries >= settings.REMEDIATION_RESTART_MAX_ATTEMPTS:
        return (
            f"{tries} automatic restarts of {cluster.name} failed in the last {settings.REMEDIATION_RESTART_WINDOW_S} s: not trying again",
            {"failed_restarts": tries},
        )
    return None


def _scale_out_possible(
    incident: Incident, node: Node | None, cluster: Cluster
) -> tuple[str, dict[str, Any]] | None:
    """Scale-out: a stopped standby cluster must serve the same model."""
    if standby_for(cluster) is None:
        return (
            f"no stopped standby cluster serves {cluster.profile.served_model_name}",
            {},
        )
    return None


# The remedy's own check; an action not listed (none) has no precondition.
_PRECONDITIONS: tuple[
    tuple[
        str,
        Callable[[Incident, Node | None, Cluster], tuple[str, dict[str, Any]] | None],
    ],
    ...,
] = (
    (RemediationAction.FAILOVER, _failover_possible),
    (RemediationAction.REPLACE, _replace_possible),
    (RemediationAction.RESTART, _restart_possible),
    (RemediationAction.SCALE_OUT, _scale_out_possible),
)


def _precondition(incident: Incident) -> tuple[str, dict[str, Any]] | None:
    """(why not, evidence) when the remedy cannot work; None when it may go ahead."""
    node, cluster = incident.node, incident.cluster
    assert cluster is not None  # guardrails refused cluster-less alerts
    for action, possible in _PRECONDITIONS:
        if incident.action == action:
            return possible(incident, node, cluster)
    return None
