"""The incident's record: timeline notes (alert events + audit), live pushes, escalation."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.models.operations import OperationKind
from console.services.audit import audit_record
from monitoring.alerts.publishing import alerts_publish, notifications_create
from monitoring.models import (
    Alert,
    AlertEvent,
    AlertEventKind,
    Incident,
    IncidentState,
    RemediationAction,
    Severity,
)

NEVER_ACT_ON = {"chip.temp_c"}  # a hot chip is never restarted automatically
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
    alert = incident.alert
    transaction.on_commit(lambda: alerts_publish([alert]))


def incident_lock(**lookup: Any) -> Incident | None:
    """The incident matching ``lookup``, row-locked until the transaction ends, its alert,
    rule, cluster and node loaded; None when there is none. Every step that moves an
    incident takes this lock first, so two workers never move one incident twice."""
    return (
        Incident.objects.select_for_update(of=("self",))
        .select_related("alert__rule", "cluster", "node")
        .filter(**lookup)
        .first()
    )


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
    ids = notifications_create([alert])

    def send() -> None:
        # Late: monitoring.alerts.tasks imports monitoring.remediation, which imports this.
        from monitoring.alerts.tasks import notification_send_task

        for pk in ids:
            notification_send_task.delay(pk)

    transaction.on_commit(send)
    return incident
