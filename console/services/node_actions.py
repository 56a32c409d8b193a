"""Operator actions around remediation: re-admit a replaced node, maintenance mode, failback.

Each one is audited. Re-admission runs the node-side preflight on the agent first and
changes nothing unless every check passes; failback is an ordinary ``failover``
operation that moves the named nodes back to HCCS, started only by a person.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.constants import HCCS_LOSS_MAX_PCT
from console.models import (
    Cluster,
    LinkMode,
    Node,
    NodeRole,
    NodeState,
    Operation,
    OperationKind,
)
from console.selectors import node_latest_sample
from console.services.agents import AgentUnreachable, agent_call
from console.services.audit import audit_record
from console.services.operations import operation_start
from engine.link_verify import CANNOT_VERIFY, NOT_RECOVERED, verify_links_recovered


class ActionRefused(Exception):
    """The action is not possible in the current state; the message says why and what to do."""

    def __init__(
        self, message: str, *, checks: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.checks = checks or []


def _model_path_for(node: Node) -> str:
    """The model a re-admitted spare would serve: that of a cluster built from the same hardware."""
    for cluster in Cluster.objects.select_related("profile").order_by("name"):
        if cluster.nodes.filter(
            npu_model=node.npu_model, npu_count=node.npu_count
        ).exists():
            return cluster.profile.model_path
    return ""


def _links_window(node: Node) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two node.collect samples of the node, FAILOVER_VERIFY_S apart."""
    first = agent_call(node, "node.collect", timeout=settings.AGENT_TIMEOUT_S)
    time.sleep(float(settings.FAILOVER_VERIFY_S))
    return first, agent_call(node, "node.collect", timeout=settings.AGENT_TIMEOUT_S)


def readmit_links_check(node: Node, *, accept_unverified: str = "") -> dict[str, Any]:
    """The links that failed when the node was replaced (Node.failed_links), checked
    again (engine.link_verify.verify_links_recovered). ``recovered`` passes; ``not
    recovered`` refuses, naming the links; ``cannot verify`` (no traffic on an idle
    node, counters unsupported) refuses unless the operator accepts it with a reason,
    which the audit row keeps. No links recorded: nothing to check."""
    if not node.failed_links:
        return {"status": "none", "reason": "no failed links were recorded"}
    failed = [tuple(k) for k in node.failed_links]
    verdict = verify_links_recovered(
        _links_window(node),
        failed,
        HCCS_LOSS_MAX_PCT,
    ).to_dict()
    names = ", ".join(f"NPU {n} chip {c} link {i}" for n, c, i in failed[:8])
    if verdict["status"] == NOT_RECOVERED:
        raise ActionRefused(
            f"{node.name} stays out of service: the HCCS links that failed ({names}) "
            f"still fail: {verdict['reason']} Replace the HCCS module or reseat it, "
            "then re-admit again."
        )
    if verdict["status"] == CANNOT_VERIFY:
        if not accept_unverified.strip():
            raise ActionRefused(
                f"{node.name}: the HCCS links that failed ({names}) cannot be checked: "
                f"{verdict['reason']} Re-admit with a reason to accept them unverified "
                "(audited), or run traffic over them first."
            )
        verdict["accepted_unverified"] = accept_unverified.strip()[:300]
    return verdict


def node_readmit(
    *, node: Node, user: Any, request: Any = None, accept_unverified_links: str = ""
) -> dict[str, Any]:
    """Put an out-of-service node back into the spare pool after its preflight passes
    and the HCCS links that failed check out (readmit_links_check).

    Returns ``{"node", "state", "checks", "links"}``; raises ActionRefused (nothing
    changed) when the node is not out of service, its agent does not answer, a check
    fails or its failed links do not pass.
    """
    if node.state != NodeState.OUT_OF_SERVICE:
        raise ActionRefused(
            f"{node.name} is {node.get_state_display()}, not out of service; nothing to re-admit"
        )
    checks = _readmit_preflight(node, user=user, request=request)
    _readmit_require_checks_passed(node, checks, user=user, request=request)
    links = _readmit_links(
        node,
        checks,
        user=user,
        request=request,
        accept_unverified=accept_unverified_links,
    )
    _readmit_commit(node, checks, links, user=user, request=request)
    node.refresh_from_db()
    return {"node": node.name, "state": node.state, "checks": checks, "links": links}


def _readmit_refused_audit(
    node: Node,
    *,
    user: Any,
    request: Any,
    message: str,
    after: dict[str, Any] | None = None,
) -> None:
    """Audit a refused re-admission (result failure, message cut to 300 characters)."""
    audit_record(
        action="node.readmit",
        actor=user,
        request=request,
        target=node,
        result="failure",
        after=after,
        message=message[:300],
    )


def _readmit_preflight(node: Node, *, user: Any, request: Any) -> list[dict[str, Any]]:
    """Run the node-side preflight on the node's agent; its checks (ActionRefused when unreachable)."""
    try:
        answer = agent_call(
            node,
            "node.preflight",
            timeout=settings.PREFLIGHT_TIMEOUT_S,
            expected_npus=node.npu_count,
            host_ip=node.management_ip,
            ports=[],
            model_path=_model_path_for(node),
            ping_targets=[],
        )
    except AgentUnreachable as exc:
        _readmit_refused_audit(
            node, user=user, request=request, message=f"agent unreachable: {exc}"
        )
        raise ActionRefused(
            f"{node.name}: {exc}; start the node agent on {node.name} (systemctl start ascend-agent) and retry"
        ) from None
    return list(answer.get("checks") or [])


def _readmit_require_checks_passed(
    node: Node, checks: list[dict[str, Any]], *, user: Any, request: Any
) -> None:
    """Audit and raise ActionRefused (with the checks) when any preflight check failed."""
    failed = [c for c in checks if c.get("status") == "fail"]
    if failed:
        summary = "; ".join(f"{c['name']}: {c['evidence']}" for c in failed)
        _readmit_refused_audit(
            node,
            user=user,
            request=request,
            after={"failed": [c["name"] for c in failed]},
            message=f"preflight failed: {summary}",
        )
        raise ActionRefused(
            f"{node.name} stays out of service: preflight failed ({summary})",
            checks=checks,
        )


def _readmit_links(
    node: Node,
    checks: list[dict[str, Any]],
    *,
    user: Any,
    request: Any,
    accept_unverified: str,
) -> dict[str, Any]:
    """readmit_links_check's verdict; a refusal or lost agent is audited and raised as ActionRefused."""
    try:
        return readmit_links_check(node, accept_unverified=accept_unverified)
    except (ActionRefused, AgentUnreachable) as exc:
        _readmit_refused_audit(
            node, user=user, request=request, message=f"links: {exc}"
        )
        raise ActionRefused(str(exc), checks=checks) from None


def _readmit_commit(
    node: Node,
    checks: list[dict[str, Any]],
    links: dict[str, Any],
    *,
    user: Any,
    request: Any,
) -> None:
    """Move the node, still out of service under a row lock, to a ready HCCS spare, with its audit row."""
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)
        if locked.state != NodeState.OUT_OF_SERVICE:
            raise ActionRefused(
                f"{node.name} was changed meanwhile (now {locked.get_state_display()})"
            )
        before = {
            "state": locked.state,
            "role": locked.role,
            "link_mode": locked.link_mode,
        }
        Node.objects.filter(pk=node.pk).update(
            state=NodeState.READY,
            role=NodeRole.SPARE,
            cluster=None,
            rank=None,
            link_mode=LinkMode.HCCS,
            link_mode_since=timezone.now(),
            link_mode_reason=f"re-admitted by {user.username} after a passing preflight"[
                :300
            ],
            failed_links=[],
            failed_links_evidence={},
        )
        audit_record(
            action="node.readmit",
            actor=user,
            request=request,
            target=node,
            before=before,
            after={
                "state": NodeState.READY,
                "role": NodeRole.SPARE,
                "link_mode": LinkMode.HCCS,
                "checks": len(checks),
                "links": links,
            },
            message=f"{len(checks)} preflight checks passed; links: {links['status']}"
            + (
                f" (accepted unverified: {links['accepted_unverified']})"
                if links.get("accepted_unverified")
                else ""
            ),
        )


def cluster_maintenance_set(
    *, cluster: Cluster, on: bool, user: Any, reason: str = "", request: Any = None
) -> Cluster:
    """Switch maintenance mode (pauses every automatic remediation on the cluster)."""
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        before = locked.maintenance_mode
        if before != on:
            Cluster.objects.filter(pk=cluster.pk).update(maintenance_mode=on)
        audit_record(
            action="cluster.maintenance",
            actor=user,
            request=request,
            target=locked,
            before={"maintenance_mode": before},
            after={"maintenance_mode": on},
            message=(reason or ("maintenance on" if on else "maintenance off"))[:300],
        )
    cluster.refresh_from_db()
    return cluster


def hccs_evidence(node: Node) -> dict[str, Any]:
    """What an operator should see before failing back: the latest HCCS loss and link health of the node."""
    ts, data = node_latest_sample(node) or (None, {})
    data = data or {}
    # NodeLatest keeps HCCS per chip as {"<npu>.<chip>": {"health", "links", "loss_pct"}}
    unhealthy = sorted(
        f"npu{key}"
        for key, h in (data.get("hccs") or {}).items()
        if h.get("health") not in (None, "OK")
    )
    return {
        "node": node.name,
        "link_mode": node.link_mode,
        "since": node.link_mode_since.isoformat() if node.link_mode_since else None,
        "reason": node.link_mode_reason,
        "hccs_loss_pct": data.get("hccs_loss_pct"),
        "hccs_loss_state": data.get("hccs_loss_state"),
        "sampled_at": ts.isoformat() if ts is not None else None,
        "unhealthy_links": unhealthy,
    }


def cluster_failback(
    *, cluster: Cluster, user: Any, reason: str, request: Any = None, source: str = "ui"
) -> Operation:
    """Start a manual failover that moves the engine back to HCCS (never automatic).

    Every rank gets the HCCS pair, not only those on RoCE: vllm-ascend reads the
    HCCL_INTRA_* pair in every rank (engine.plans.link_pair_errors refuses mixed pairs).
    """
    nodes = list(cluster.nodes.filter(link_mode=LinkMode.ROCE).order_by("rank"))
    if not nodes:
        raise ActionRefused(
            f"no node of {cluster.name} runs on RoCE; nothing to fail back"
        )
    evidence = [hccs_evidence(n) for n in nodes]
    return operation_start(
        cluster=cluster,
        kind=OperationKind.FAILOVER,
        user=user,
        reason=reason or f"fail back to HCCS: {', '.join(n.name for n in nodes)}",
        source=source,
        params={
            "link_modes": {
                n.name: LinkMode.HCCS.value for n in cluster.nodes.order_by("rank")
            },
            "failback": evidence,
        },
        request=request,
    )
