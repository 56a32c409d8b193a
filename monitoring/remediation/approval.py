"""An operator's decision on an ``ask`` incident: approve (guardrails again, then act) or reject.

Kept apart from the automatic decision (``decide``): these run on a request, lock the
incident and raise ``RemediationRefused`` for the view to show.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from console.models.operations import Operation
from monitoring.models import Incident, IncidentState
from monitoring.remediation.act import _describe, _execute
from monitoring.remediation.guardrails import _guardrail
from monitoring.remediation.preconditions import _precondition
from monitoring.remediation.timeline import (
    RemediationRefused,
    _escalate,
    _note,
    _set,
    incident_lock,
)


def _awaiting_approval(pk: int) -> Incident:
    """The incident, locked; RemediationRefused unless it still awaits an operator."""
    incident = incident_lock(pk=pk)
    if incident is None or incident.state != IncidentState.AWAITING_APPROVAL:
        state = incident.state if incident is not None else "gone"
        raise RemediationRefused(f"incident #{pk} is {state}, not awaiting approval")
    return incident


def incident_approve(*, incident: Incident, user: Any) -> Operation | None:
    """An operator approves an ``ask`` incident: guardrails again, then act. Raises RemediationRefused."""
    with transaction.atomic():
        incident = _awaiting_approval(incident.pk)
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
        incident = _awaiting_approval(incident.pk)
        _set(
            incident,
            state=IncidentState.REJECTED,
            summary=f"rejected by {user.username}",
        )
        _note(incident, "reject", f"rejected by {user.username}", actor=user)
    return incident
