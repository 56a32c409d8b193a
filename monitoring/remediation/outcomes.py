"""After the operation: verify, recover, move to the next remedy or retry with backoff, escalate."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.models.operations import Operation, OperationState
from engine.capabilities import ROCE_FAILOVER
from engine.link_verify import CANNOT_VERIFY
from monitoring.alerts.publishing import alerts_publish
from monitoring.models import (
    Alert,
    AlertEvent,
    AlertEventKind,
    AlertState,
    Incident,
    IncidentState,
    RemediationAction,
)
from monitoring.remediation.act import _execute
from monitoring.remediation.links import link_remedy_choose
from monitoring.remediation.preconditions import _precondition
from monitoring.remediation.timeline import (
    _escalate,
    _note,
    _set,
    incident_lock,
)


def operation_finished(operation_id: int) -> None:
    """Move the incident that started this operation on (on console's ``operation_finished``)."""
    op = Operation.objects.select_related("cluster").get(pk=operation_id)
    with transaction.atomic():
        incident = incident_lock(operation=op)
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
        node = incident.node
        if not verification.get("ok"):
            # "cannot verify" is not a pass: the engine is healthy, the fault is not known gone
            status = verification.get("status", "not_switched")
            said = (
                "the switch to RoCE cannot be verified"
                if status == CANNOT_VERIFY
                else "the switch to RoCE did not take effect"
            )
            _note(
                incident,
                "verify",
                f"{said} on {node.name if node else '?'} ({status}): "
                f"{verification.get('detail', '')} Moving to the next remedy.",
                verification=verification,
            )
            _set(incident, healthy_at=op.finished_at)
            _second_remedy(incident)
            return
        _note(
            incident,
            "verify",
            f"verified ({verification.get('status')}): {verification.get('detail', '')}",
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
        # Late: monitoring.alerts.tasks imports monitoring.remediation, which imports this.
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
            f"{what}; moving to the next remedy",
        )
        _second_remedy(incident)
        return
    _escalate(incident, what)


def _second_remedy(incident: Incident) -> None:
    """The failover did not hold (failed, not switched, or cannot verify): the next
    remedy that can work on this hardware (a same-model spare), else escalate."""
    if incident.node is None or not link_remedy_choose(
        incident, tried=(ROCE_FAILOVER,)
    ):
        if incident.state != IncidentState.ESCALATED:
            _escalate(incident, "no next remedy for a cluster-wide alert")
        return
    problem = _precondition(incident)
    if problem:
        _escalate(incident, problem[0], **problem[1])
        return
    _execute(incident)


def remediation_retry(incident_id: int) -> None:
    """The backoff ran out: try the incident's action again (unless something changed meanwhile)."""
    with transaction.atomic():
        incident = incident_lock(pk=incident_id)
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
