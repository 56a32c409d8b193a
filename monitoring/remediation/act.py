"""Acting: start the operation for an incident's remedy, linked to it in one transaction.

``_execute`` is the one place an incident becomes an operation, for an automatic decision
(``decide``), an operator's approval (``approval``) and a retry or next remedy
(``outcomes``); ``_describe`` is the same remedy in words for the timeline.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.models import Cluster, LinkMode, Node
from console.models.operations import Operation
from console.selectors import standby_for
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_start,
)
from monitoring.models import Incident, IncidentState, RemediationAction
from monitoring.remediation.timeline import (
    _OPERATION_OF_ACTION,
    _escalate,
    _note,
    _set,
)


def _describe(incident: Incident) -> str:
    node = incident.node.name if incident.node else incident.alert.target
    described: dict[str, str] = {
        RemediationAction.FAILOVER: f"fail {node}'s intra-server link over to RoCE (rank-ordered restart)",
        RemediationAction.REPLACE: f"replace {node} with an idle spare (rank-ordered restart)",
        RemediationAction.RESTART: f"restart {incident.cluster.name if incident.cluster else ''} in rank order",
        RemediationAction.SCALE_OUT: "start the standby cluster and add it to the gateway pool",
    }
    return described.get(incident.action, incident.action)


def _execute(incident: Incident, *, user: Any = None) -> Operation | None:
    """Start the operation for the incident's current action; records it, or escalates on refusal."""
    cluster, node = incident.cluster, incident.node
    assert cluster is not None
    kind = _OPERATION_OF_ACTION[RemediationAction(incident.action)]
    planned = _operation_plan(incident, cluster, node)
    if planned is None:
        return None
    target, params = planned
    reason = f"incident #{incident.pk}: {incident.alert.message}"[:500]
    try:
        # one transaction: the worker picks the operation up only once it is linked
        with transaction.atomic():
            op = operation_start(
                cluster=target,
                kind=kind,
                user=user,
                actor="remediation",
                source="automation" if user is None else "ui",
                reason=reason,
                params=params,
            )
            _set(
                incident,
                state=IncidentState.RUNNING,
                attempts=incident.attempts + 1,
                operation=op,
                operation_ids=[*incident.operation_ids, op.pk],
                summary=f"operation #{op.pk} ({kind} on {target.name}) started",
            )
    except (OperationConflict, OperationRefused) as exc:
        _escalate(incident, f"could not start {kind} on {target.name}: {exc}")
        return None
    _note(
        incident,
        "operation",
        f"operation #{op.pk}: {kind} on {target.name}",
        operation=op.pk,
        attempt=incident.attempts,
    )
    return op


def _operation_plan(
    incident: Incident, cluster: Cluster, node: Node | None
) -> tuple[Cluster, dict[str, Any]] | None:
    """The cluster the operation runs on and its parameters, by the action; None (escalated)
    when a scale-out finds no standby."""
    target = cluster
    # "remedy": the runbook keeps the dead engine's evidence before it restarts anything
    params: dict[str, Any] = {"remedy": True}
    if incident.action == RemediationAction.FAILOVER and node is not None:
        # the same HCCL_INTRA_* pair on every rank: vllm-ascend reads it in each rank
        # (engine.plans.LINK_PAIR_REASON); the lossy node's switch is the one verified
        params.update(
            link_modes={n.name: LinkMode.ROCE.value for n in cluster.ranked_nodes()},
            verify_node=node.name,
        )
    elif incident.action == RemediationAction.REPLACE and node is not None:
        params.update(node=node.name)
        if incident.alert.rule.metric == "node.hccs_loss_pct":
            # a link fault: the runbook records which links fail, for re-admission
            params.update(record_links=True)
    elif incident.action == RemediationAction.SCALE_OUT:
        standby = standby_for(cluster)
        if standby is None:
            _escalate(
                incident,
                f"no stopped standby cluster serves {cluster.profile.served_model_name}",
            )
            return None
        target = standby
        params.update(scale_out_of=cluster.name)
    return target, params
