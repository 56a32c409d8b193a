"""Deciding: what to do about a firing alert, as its steps.

Skip a silenced alert, join an open incident of the same remedy, or open an incident and
take it through the guardrails (``guardrails``), the remedy's preconditions with evidence
(``preconditions``, trying the next remedy when one cannot work) to an operator's approval
(``approval``) or the operation itself (``act``). Every decision, taken or skipped, goes to
the alert's timeline and the audit log.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from console.models import LinkMode
from console.services.audit import audit_record
from engine.capabilities import ROCE_FAILOVER
from monitoring.models import (
    INCIDENT_OPEN_STATES,
    Alert,
    AlertEvent,
    AlertEventKind,
    Incident,
    IncidentState,
    RemediationAction,
    RemediationPolicy,
)
from monitoring.remediation.act import _describe, _execute
from monitoring.remediation.guardrails import _guardrail
from monitoring.remediation.links import link_remedy_choose
from monitoring.remediation.preconditions import _precondition
from monitoring.remediation.timeline import _escalate, _note, _set


def alert_firing(alert: Alert, *, now: datetime | None = None) -> Incident | None:
    """Decide what to do about a firing alert; returns the incident (new or joined), or None."""
    now = now or timezone.now()
    alert = Alert.objects.select_related("rule", "cluster", "node").get(pk=alert.pk)
    if alert.rule.remediation_policy == RemediationPolicy.OFF:
        return None
    if alert.silenced:  # a skipped decision is recorded like any other
        _skip_silenced(alert)
        return None
    with transaction.atomic():
        joined = _incident_to_join(alert)
        if (
            joined is not None
        ):  # e.g. "engine process failed" and "engine health failing" together
            _note_joined(alert, joined)
            return joined
        incident = _incident_open(alert, now=now)
        reason = _guardrail(incident, now=now)
        if reason:
            _set(incident, state=IncidentState.SKIPPED, summary=reason)
            _note(incident, "skip", f"no action: {reason}")
            return incident
        if not _remedy_that_can_work(incident):
            return incident
        _ask_or_act(incident)
    return incident


def _skip_silenced(alert: Alert) -> None:
    """The decision not to act on a silenced alert: on its timeline and in the audit log."""
    rule = alert.rule
    message = "no action: the alert is silenced"
    AlertEvent.objects.create(
        alert=alert,
        kind=AlertEventKind.REMEDIATION,
        message=message,
        data={"decision": "skip", "action": rule.remediation_action},
    )
    audit_record(
        action="remediation.skip",
        target=alert,
        target_repr=f"alert #{alert.pk} ({rule.name} {alert.target})",
        after={"action": rule.remediation_action, "reason": "silenced"},
        result="denied",
        message=message,
    )


def _incident_to_join(alert: Alert) -> Incident | None:
    """Another open incident with the same remedy on the alert's cluster (locked), if any."""
    action = alert.rule.remediation_action
    cluster = alert.cluster
    if action == RemediationAction.NONE or cluster is None:
        return None
    return (
        Incident.objects.select_for_update(of=("self",))
        .filter(cluster=cluster, action=action, state__in=INCIDENT_OPEN_STATES)
        .exclude(alert=alert)
        .first()
    )


def _note_joined(alert: Alert, joined: Incident) -> None:
    """The alert joined ``joined``: on the alert's timeline and in the audit log."""
    message = f"joined incident #{joined.pk} ({joined.action}, already {joined.state})"
    AlertEvent.objects.create(
        alert=alert,
        kind=AlertEventKind.REMEDIATION,
        message=message,
        data={"incident": joined.pk, "decision": "join"},
    )
    audit_record(
        action="remediation.join",
        target=joined,
        target_repr=f"incident #{joined.pk} ({joined.action} {joined.alert.target})",
        after={"alert": alert.pk, "state": joined.state},
        message=message[:300],
    )


def _incident_open(alert: Alert, *, now: datetime) -> Incident:
    """A new incident for the alert, scheduled, with the rule's action and policy."""
    rule = alert.rule
    return Incident.objects.create(
        alert=alert,
        cluster=alert.cluster,
        node=alert.node,
        action=rule.remediation_action,
        policy=rule.remediation_policy,
        state=IncidentState.SCHEDULED,
        fault_onset_at=alert.fault_onset_at,
        detected_at=alert.fired_at or now,
        decided_at=now,
    )


def _remedy_that_can_work(incident: Incident) -> bool:
    """Settle the incident on a remedy whose preconditions hold; False when none does.

    A link remedy is chosen (or the incident ends) when none fits; an escalation records why
    the last one cannot work.
    """
    if (
        incident.action == RemediationAction.FAILOVER
        and incident.node is not None
        and incident.node.link_mode != LinkMode.ROCE
        and not link_remedy_choose(incident)
    ):  # HCCS loss: the remedy comes from the server model's capabilities
        return False
    problem = _precondition(incident)
    if (
        problem
        and incident.action == RemediationAction.FAILOVER
        and incident.node is not None
    ):  # e.g. its RoCE ports are down: the next remedy that can work, if any
        _note(incident, "next", f"{problem[0]}: trying the next remedy", **problem[1])
        if not link_remedy_choose(
            incident, tried=(ROCE_FAILOVER,), because=problem[0], **problem[1]
        ):
            return False
        problem = _precondition(incident)
    if problem:
        _escalate(incident, problem[0], **problem[1])
        return False
    return True


def _ask_or_act(incident: Incident) -> None:
    """By the policy: wait for an operator's approval, or start the operation now."""
    if incident.policy == RemediationPolicy.ASK:
        # the remedy chosen (e.g. a spare's replace where the rule says failover), the
        # one an approval starts
        _set(
            incident,
            state=IncidentState.AWAITING_APPROVAL,
            summary=f"{incident.action} waits for an operator's approval",
        )
        _note(
            incident,
            "ask",
            f"proposed: {_describe(incident)}; waiting for an operator to approve",
        )
        return
    _note(incident, "act", f"automatic: {_describe(incident)}")
    _execute(incident)
