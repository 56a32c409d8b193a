"""Alert-driven remediation: decide, act through operations, verify, move to the next remedy, escalate.

``monitoring.alerts.services.alerts_evaluate`` calls ``alert_firing`` (after commit, on the
control worker) for an alert that fired with a remediation policy, and ``alert_resolved``
when it resolves. The control worker calls ``operation_finished`` after every operation;
the ones an incident started move the incident on.

Remedies, by the rule's action:
- failover: node N's intra-server link → RoCE (a ``failover`` operation restarting the
  deployment in rank order with N's HCCL_INTRA_* switched), only when N's RoCE ports are
  all UP and healthy (else: escalate, no restart). The operation verifies that N's HCCS
  counters stand still while RoCE grows; when they do not, the incident says so and
  moves to the second remedy:
- replace: an idle spare of the same hardware takes N's rank (``replace`` operation);
  N is marked out of service until an operator re-admits it after a passing preflight.
- restart: rank-ordered restart, retried with exponential backoff; after K failed
  attempts in the window: escalate.
- scale_out: start the standby cluster serving the same model (it joins the gateway's
  pool once Running); scale-in is manual.
Temperature never triggers an action. Guardrails: maintenance mode, one operation per
cluster, cooldown per rule, max automatic actions per hour per cluster. Every decision,
taken or skipped, goes to the alert's timeline and the audit log.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.models import Cluster, ClusterState, Node, NodeRole, NodeState
from console.models.operations import Operation, OperationKind, OperationState
from console.services.audit import audit_record
from monitoring.models import NodeLatest
from monitoring.models_alerts import (
    INCIDENT_OPEN_STATES,
    Alert,
    AlertEvent,
    AlertEventKind,
    AlertState,
    Incident,
    IncidentState,
    RemediationAction,
    RemediationPolicy,
    Severity,
)

log = logging.getLogger(__name__)

NEVER_ACT_ON = {"chip.temp_c"}  # a hot chip is never restarted automatically
ROCE_OK_HEALTH = {"success", "ok"}
_OPERATION_OF_ACTION = {
    RemediationAction.FAILOVER: OperationKind.FAILOVER,
    RemediationAction.REPLACE: OperationKind.REPLACE,
    RemediationAction.RESTART: OperationKind.RESTART,
    RemediationAction.SCALE_OUT: OperationKind.START,
}


class RemediationRefused(Exception):
    """An approval or manual action that cannot be taken; the message says why."""


# -- timeline -------------------------------------------------------------------------


def _note(
    incident: Incident, decision: str, message: str, *, actor: Any = None, **data: Any
) -> None:
    """One line on the alert's timeline and one audit row, for every decision taken or skipped."""
    AlertEvent.objects.create(
        alert=incident.alert,
        kind=AlertEventKind.REMEDIATION,
        message=message[:500],
        actor=actor if getattr(actor, "pk", None) else None,
        data={
            "incident": incident.pk,
            "decision": decision,
            "action": incident.action,
            **data,
        },
    )
    audit_record(
        action=f"remediation.{decision}",
        actor=actor,
        target=incident,
        target_repr=f"incident #{incident.pk} ({incident.action} {incident.alert.target})",
        after={
            "state": incident.state,
            "action": incident.action,
            "message": message[:300],
            **data,
        },
        result="denied" if decision in ("skip", "escalate") else "success",
        message=message[:300],
    )
    _publish(incident)


def _publish(incident: Incident) -> None:
    from monitoring.alerts.services import alerts_publish

    alert = incident.alert
    transaction.on_commit(lambda: alerts_publish([alert]))


def _set(incident: Incident, **fields: Any) -> None:
    for key, value in fields.items():
        setattr(incident, key, value)
    incident.save(update_fields=list(fields))


def _escalate(incident: Incident, message: str, **evidence: Any) -> Incident:
    """Stop acting; raise the alert to critical with the evidence and notify again."""
    _set(incident, state=IncidentState.ESCALATED, summary=message[:500])
    alert = incident.alert
    if alert.severity != Severity.CRITICAL or not alert.message.startswith("ESCALATED"):
        Alert.objects.filter(pk=alert.pk).update(
            severity=Severity.CRITICAL, message=f"ESCALATED: {message}"[:300]
        )
        alert.refresh_from_db()
    _note(incident, "escalate", message, **evidence)
    from monitoring.alerts.services import _notifications_create

    ids = _notifications_create([alert])

    def send() -> None:
        from monitoring.alerts.tasks import notification_send_task

        for pk in ids:
            notification_send_task.delay(pk)

    transaction.on_commit(send)
    return incident


# -- decision ---------------------------------------------------------------------------


def alert_firing(alert: Alert, *, now: datetime | None = None) -> Incident | None:
    """Decide what to do about a firing alert; returns the incident (new or joined), or None."""
    now = now or timezone.now()
    alert = Alert.objects.select_related("rule", "cluster", "node").get(pk=alert.pk)
    rule = alert.rule
    if rule.remediation_policy == RemediationPolicy.OFF or alert.silenced:
        return None
    action = rule.remediation_action
    cluster = alert.cluster
    with transaction.atomic():
        if action != RemediationAction.NONE and cluster is not None:
            joined = (
                Incident.objects.select_for_update(of=("self",))
                .filter(cluster=cluster, action=action, state__in=INCIDENT_OPEN_STATES)
                .exclude(alert=alert)
                .first()
            )
            if (
                joined is not None
            ):  # e.g. "engine process failed" and "engine health failing" together
                AlertEvent.objects.create(
                    alert=alert,
                    kind=AlertEventKind.REMEDIATION,
                    message=f"joined incident #{joined.pk} ({joined.action}, already {joined.state})",
                    data={"incident": joined.pk, "decision": "join"},
                )
                return joined
        incident = Incident.objects.create(
            alert=alert,
            cluster=cluster,
            node=alert.node,
            action=action,
            policy=rule.remediation_policy,
            state=IncidentState.SCHEDULED,
            fault_onset_at=alert.fault_onset_at,
            detected_at=alert.fired_at or now,
            decided_at=now,
        )
        reason = _guardrail(incident, now=now)
        if reason:
            _set(incident, state=IncidentState.SKIPPED, summary=reason)
            _note(incident, "skip", f"no action: {reason}")
            return incident
        problem = _precondition(incident)
        if problem:
            return _escalate(incident, problem[0], **problem[1])
        if incident.policy == RemediationPolicy.ASK:
            _set(
                incident,
                state=IncidentState.AWAITING_APPROVAL,
                summary=f"{action} waits for an operator's approval",
            )
            _note(
                incident,
                "ask",
                f"proposed: {_describe(incident)}; waiting for an operator to approve",
            )
            return incident
        _note(incident, "act", f"automatic: {_describe(incident)}")
        _execute(incident)
    return incident


def _describe(incident: Incident) -> str:
    node = incident.node.name if incident.node else incident.alert.target
    return {
        RemediationAction.FAILOVER: f"fail {node}'s intra-server link over to RoCE (rank-ordered restart)",
        RemediationAction.REPLACE: f"replace {node} with an idle spare (rank-ordered restart)",
        RemediationAction.RESTART: f"restart {incident.cluster.name if incident.cluster else ''} in rank order",
        RemediationAction.SCALE_OUT: "start the standby cluster and add it to the gateway pool",
    }.get(incident.action, incident.action)


def _guardrail(incident: Incident, *, now: datetime) -> str:
    """Why no action may be taken now ('' = go ahead)."""
    alert, cluster = incident.alert, incident.cluster
    if alert.rule.metric in NEVER_ACT_ON:
        return "temperature alerts never trigger an automatic action (a hot chip is not restarted)"
    if incident.action == RemediationAction.NONE:
        return "the rule has a policy but no action"
    if cluster is None:
        return "the alert belongs to no cluster"
    if cluster.maintenance_mode:
        return f"{cluster.name} is in maintenance mode (automatic actions paused)"
    if (
        cluster.state not in (ClusterState.RUNNING, ClusterState.DEGRADED)
        and incident.action != RemediationAction.RESTART
    ):
        return f"{cluster.name} is {cluster.state}, not serving"
    running = Operation.objects.filter(
        cluster=cluster, finished_at__isnull=True
    ).first()
    if running is not None:
        return f"operation #{running.pk} ({running.kind}) is active on {cluster.name}"
    cooldown = timedelta(seconds=alert.rule.cooldown_s)
    recent = (
        Incident.objects.filter(
            cluster=cluster,
            action=incident.action,
            operation_started_at__gte=now - cooldown,
        )
        .exclude(pk=incident.pk)
        .order_by("-operation_started_at")
        .first()
    )
    if recent is not None:
        return f"cooldown: incident #{recent.pk} acted at {recent.operation_started_at:%H:%M:%S} (cooldown {alert.rule.cooldown_s} s)"
    hour = Incident.objects.filter(
        cluster=cluster, operation_started_at__gte=now - timedelta(hours=1)
    ).exclude(pk=incident.pk)
    acted = sum(max(1, i.attempts) for i in hour)
    if acted >= settings.REMEDIATION_MAX_ACTIONS_PER_HOUR:
        return f"{acted} automatic actions on {cluster.name} in the last hour (limit {settings.REMEDIATION_MAX_ACTIONS_PER_HOUR})"
    return ""


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


def spare_for(node: Node) -> Node | None:
    """An idle spare of the same hardware (in no cluster, ready, same NPU model/count/HBM)."""
    return (
        Node.objects.filter(
            cluster__isnull=True,
            role=NodeRole.SPARE,
            npu_model=node.npu_model,
            npu_count=node.npu_count,
            hbm_per_npu_gb=node.hbm_per_npu_gb,
        )
        .exclude(
            state__in=(NodeState.OUT_OF_SERVICE, NodeState.UNREACHABLE, NodeState.STALE)
        )
        .exclude(pk=node.pk)
        .order_by("name")
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


def _precondition(incident: Incident) -> tuple[str, dict[str, Any]] | None:
    """(why not, evidence) when the remedy cannot work; None when it may go ahead."""
    node, cluster = incident.node, incident.cluster
    assert cluster is not None  # guardrails refused cluster-less alerts
    if incident.action == RemediationAction.FAILOVER:
        if node is None:
            return "failover needs a node-scoped alert", {}
        if node.link_mode == "roce":
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
    if incident.action == RemediationAction.REPLACE:
        if node is None:
            return "replacement needs a node-scoped alert", {}
        if spare_for(node) is None:
            return (
                f"no idle spare with {node.npu_count} × {node.npu_model} ({node.hbm_per_npu_gb} GB) to replace {node.name}",
                {},
            )
    if incident.action == RemediationAction.RESTART:
        window = timezone.now() - timedelta(
            seconds=settings.REMEDIATION_RESTART_WINDOW_S
        )
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
    if incident.action == RemediationAction.SCALE_OUT and standby_for(cluster) is None:
        return (
            f"no stopped standby cluster serves {cluster.profile.served_model_name}",
            {},
        )
    return None


# -- acting -------------------------------------------------------------------------------


def _execute(incident: Incident, *, user: Any = None) -> Operation | None:
    """Start the operation for the incident's current action; records it, or escalates on refusal."""
    from console.services.operations import (
        OperationConflict,
        OperationRefused,
        operation_start,
    )

    cluster, node = incident.cluster, incident.node
    assert cluster is not None
    kind = _OPERATION_OF_ACTION[RemediationAction(incident.action)]
    target = cluster
    params: dict[str, Any] = {"incident": incident.pk}
    if incident.action == RemediationAction.FAILOVER and node is not None:
        params.update(link_modes={node.name: "roce"}, verify_node=node.name)
    elif incident.action == RemediationAction.REPLACE and node is not None:
        params.update(node=node.name)
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
    reason = f"incident #{incident.pk}: {incident.alert.message}"[:500]
    try:
        op = operation_start(
            cluster=target,
            kind=kind,
            user=user,
            actor="remediation",
            source="automation" if user is None else "ui",
            reason=reason,
            params=params,
        )
    except (OperationConflict, OperationRefused) as exc:
        _escalate(incident, f"could not start {kind} on {target.name}: {exc}")
        return None
    _set(
        incident,
        state=IncidentState.RUNNING,
        attempts=incident.attempts + 1,
        operation_ids=[*incident.operation_ids, op.pk],
        summary=f"operation #{op.pk} ({kind} on {target.name}) started",
    )
    _note(
        incident,
        "operation",
        f"operation #{op.pk}: {kind} on {target.name}",
        operation=op.pk,
        attempt=incident.attempts,
    )
    return op


def incident_approve(*, incident: Incident, user: Any) -> Operation | None:
    """An operator approves an ``ask`` incident: guardrails again, then act. Raises RemediationRefused."""
    with transaction.atomic():
        incident = (
            Incident.objects.select_for_update(of=("self",))
            .select_related("alert__rule", "cluster", "node")
            .get(pk=incident.pk)
        )
        if incident.state != IncidentState.AWAITING_APPROVAL:
            raise RemediationRefused(
                f"incident #{incident.pk} is {incident.state}, not awaiting approval"
            )
        _set(
            incident,
            approved_by=user,
            approved_at=timezone.now(),
            state=IncidentState.SCHEDULED,
        )
        reason = _guardrail(incident, now=timezone.now())
        if reason:
            _set(incident, state=IncidentState.AWAITING_APPROVAL)
            raise RemediationRefused(reason)
        problem = _precondition(incident)
        if problem:
            _escalate(incident, problem[0], **problem[1])
            return None
        _note(
            incident,
            "approve",
            f"approved by {user.username}: {_describe(incident)}",
            actor=user,
        )
        return _execute(incident, user=user)


def incident_reject(*, incident: Incident, user: Any) -> Incident:
    """An operator declines an ``ask`` incident (the alert stays)."""
    with transaction.atomic():
        incident = (
            Incident.objects.select_for_update(of=("self",))
            .select_related("alert")
            .get(pk=incident.pk)
        )
        if incident.state != IncidentState.AWAITING_APPROVAL:
            raise RemediationRefused(
                f"incident #{incident.pk} is {incident.state}, not awaiting approval"
            )
        _set(
            incident,
            state=IncidentState.REJECTED,
            summary=f"rejected by {user.username}",
        )
        _note(incident, "reject", f"rejected by {user.username}", actor=user)
    return incident


def operation_finished(operation_id: int) -> None:
    """Move the incident that started this operation on (called by the control worker)."""
    op = Operation.objects.select_related("cluster").get(pk=operation_id)
    incident_id = (op.params or {}).get("incident")
    if not incident_id:
        return
    with transaction.atomic():
        incident = (
            Incident.objects.select_for_update(of=("self",))
            .select_related("alert__rule", "cluster", "node")
            .filter(pk=incident_id)
            .first()
        )
        if incident is None or incident.state != IncidentState.RUNNING:
            return
        if incident.operation_started_at is None and op.started_at is not None:
            _set(incident, operation_started_at=op.started_at)
        if op.state == OperationState.SUCCEEDED:
            _succeeded(incident, op)
        elif op.state == OperationState.CANCELLED:
            # a person stepped in: automation stands down for this incident
            who = (op.params or {}).get("cancel_requested") or "an operator"
            _set(
                incident,
                state=IncidentState.SKIPPED,
                summary=f"operation #{op.pk} was cancelled by {who}; no further automatic action",
            )
            _note(
                incident,
                "skip",
                f"operation #{op.pk} was cancelled by {who}: automation stands down for this incident",
                operation=op.pk,
            )
        elif op.state == OperationState.INTERRUPTED:
            # the control plane itself lost the operation: never pile another restart on top
            _escalate(
                incident,
                f"operation #{op.pk} ({op.kind}) was interrupted: {op.error[:200]}; "
                "check the control worker and the cluster, then act by hand",
                operation=op.pk,
            )
        else:
            _failed(incident, op)


def _succeeded(incident: Incident, op: Operation) -> None:
    verification = (op.result or {}).get("verification")
    if incident.action == RemediationAction.FAILOVER and verification is not None:
        _set(incident, verification=verification)
        if verification.get("ok") is None:
            # no traffic on either link: replacing a node on no evidence would be a guess
            _set(incident, healthy_at=op.finished_at)
            _escalate(
                incident,
                f"failover verification inconclusive: {verification.get('detail', '')}; "
                "the engine is healthy on RoCE, check the node's traffic by hand",
                verification=verification,
            )
            return
        if not verification.get("ok"):
            node = incident.node
            _note(
                incident,
                "verify",
                f"the switch to RoCE did not take effect on {node.name if node else '?'}: {verification.get('detail', '')} "
                "(whether HCCL honours HCCL_INTRA_ROCE_ENABLE depends on hardware, CANN version and operator path); "
                "moving to the second remedy: replace the node with a spare",
                verification=verification,
            )
            _set(incident, action=RemediationAction.REPLACE)
            problem = _precondition(incident)
            if problem:
                _escalate(incident, problem[0], **problem[1])
                return
            _execute(incident)
            return
        _note(
            incident,
            "verify",
            f"verified: {verification.get('detail', '')}",
            verification=verification,
        )
    _set(
        incident,
        state=IncidentState.RECOVERED,
        healthy_at=op.finished_at,
        summary=f"operation #{op.pk} succeeded; engine healthy",
    )
    mttr = incident.mttr_s if incident.resolved_at else None
    tail = f"; time to recovery {mttr:.1f} s" if mttr is not None else ""
    _note(
        incident,
        "recovered",
        f"operation #{op.pk} succeeded: engine healthy again{tail}",
        operation=op.pk,
        mttr_s=mttr,
    )
    if incident.action == RemediationAction.REPLACE:
        _replaced_node_alerts_resolve(incident, op)


def _replaced_node_alerts_resolve(incident: Incident, op: Operation) -> None:
    """The replaced node left service: its open alerts end (their target is no longer measured)."""
    node = incident.node
    if node is None:
        return
    now = timezone.now()
    spare = (op.result or {}).get("replace", {}).get("spare", "a spare")
    alerts = list(
        Alert.objects.filter(node=node, resolved_at__isnull=True).select_related(
            "rule", "cluster"
        )
    )
    for alert in alerts:
        Alert.objects.filter(pk=alert.pk).update(
            state=AlertState.RESOLVED, resolved_at=now
        )
        AlertEvent.objects.create(
            alert=alert,
            kind=AlertEventKind.RESOLVED,
            at=now,
            message=f"{node.name} was replaced by {spare} and is out of service",
        )
    Incident.objects.filter(alert__in=alerts, resolved_at__isnull=True).update(
        resolved_at=now
    )
    incident.refresh_from_db()
    for alert in alerts:
        alert.refresh_from_db()
    from monitoring.alerts.services import alerts_publish

    transaction.on_commit(lambda: alerts_publish(alerts))


def _failed(incident: Incident, op: Operation) -> None:
    what = f"operation #{op.pk} ({op.kind}) {op.state}: {op.error[:200]}"
    if incident.action == RemediationAction.RESTART:
        if incident.attempts >= settings.REMEDIATION_RESTART_MAX_ATTEMPTS:
            _escalate(
                incident,
                f"{incident.attempts} restarts failed; last: {what}",
                attempts=incident.attempts,
            )
            return
        delay = settings.REMEDIATION_RESTART_BACKOFF_S * (2 ** (incident.attempts - 1))
        _set(incident, summary=f"{what}; retrying in {delay:g} s")
        _note(
            incident,
            "retry",
            f"{what}; attempt {incident.attempts + 1} of {settings.REMEDIATION_RESTART_MAX_ATTEMPTS} in {delay:g} s (backoff)",
            delay_s=delay,
        )
        from monitoring.alerts.tasks import remediation_retry_task

        pk = incident.pk
        transaction.on_commit(
            lambda: remediation_retry_task.apply_async(
                kwargs={"incident_id": pk}, countdown=delay
            )
        )
        return
    if incident.action == RemediationAction.FAILOVER:
        _note(
            incident,
            "next",
            f"{what}; moving to the second remedy: replace the node with a spare",
        )
        _set(incident, action=RemediationAction.REPLACE)
        problem = _precondition(incident)
        if problem:
            _escalate(incident, problem[0], **problem[1])
            return
        _execute(incident)
        return
    _escalate(incident, what)


def remediation_retry(incident_id: int) -> None:
    """The backoff ran out: try the incident's action again (unless something changed meanwhile)."""
    with transaction.atomic():
        incident = (
            Incident.objects.select_for_update(of=("self",))
            .select_related("alert__rule", "cluster", "node")
            .filter(pk=incident_id)
            .first()
        )
        if incident is None or incident.state != IncidentState.RUNNING:
            return
        cluster = incident.cluster
        assert cluster is not None
        cluster.refresh_from_db()
        if cluster.maintenance_mode:
            _set(
                incident,
                state=IncidentState.SKIPPED,
                summary="maintenance mode switched on during the backoff",
            )
            _note(incident, "skip", f"no retry: {cluster.name} is in maintenance mode")
            return
        _execute(incident)


def alert_resolved(alert: Alert) -> None:
    """The alert resolved: close its incidents' clocks; an unapproved proposal lapses."""
    now = alert.resolved_at or timezone.now()
    with transaction.atomic():
        for incident in (
            Incident.objects.select_for_update(of=("self",))
            .select_related("alert")
            .filter(alert=alert, resolved_at__isnull=True)
        ):
            if incident.state == IncidentState.AWAITING_APPROVAL:
                _set(
                    incident,
                    state=IncidentState.SKIPPED,
                    summary="the alert resolved before anyone approved",
                    resolved_at=now,
                )
                _note(
                    incident,
                    "lapse",
                    "the alert resolved before anyone approved the action",
                )
                continue
            _set(incident, resolved_at=now)
            if incident.state in (IncidentState.RECOVERED, IncidentState.RUNNING):
                mttr = incident.mttr_s
                _note(
                    incident,
                    "resolved",
                    f"alert resolved; time to recovery {mttr:.1f} s"
                    if mttr is not None
                    else "alert resolved",
                    mttr_s=mttr,
                )
