"""Evaluate every enabled rule after a collect round and apply the transitions in bulk.

``alerts_evaluate`` is the service (called by the ``monitoring.alerts_evaluate`` task);
the functions below it are its steps in the order it runs them, then the helpers the
steps share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from monitoring import remediation
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.publishing import alerts_publish, notifications_create
from monitoring.alerts.rules import (
    Action,
    Observation,
    OpenAlert,
    RuleSpec,
    evaluate,
    silence_matches,
)
from monitoring.alerts.selectors import observations_collect
from monitoring.models.alerts import (
    ACTIVE_STATES,
    Alert,
    AlertEvent,
    AlertEventKind,
    AlertRule,
    AlertState,
    RemediationPolicy,
    Silence,
)

# What evaluation changes on an open alert (its one bulk UPDATE).
_EVALUATED_FIELDS = [
    "state",
    "value",
    "peak_value",
    "last_eval_at",
    "fired_at",
    "resolved_at",
    "message",
    "silenced",
]


@dataclass
class EvalSummary:
    """What one evaluation did (ids of alerts per transition)."""

    opened: list[int] = field(default_factory=list)
    fired: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[int]]:
        return {
            "opened": self.opened,
            "fired": self.fired,
            "resolved": self.resolved,
            "cleared": self.cleared,
        }


def alerts_evaluate(*, now: datetime | None = None) -> EvalSummary:
    """Evaluate every enabled rule over the latest samples and apply the transitions in one transaction.

    Queries do not grow with rules or targets: observations (a few), open alerts (one),
    silences (one), then bulk writes. After commit: WebSocket events, notifications, and
    the remediation seam for alerts that fired (policy != off) or resolved.
    """
    now = now or timezone.now()
    summary = EvalSummary()
    rules = list(AlertRule.objects.filter(enabled=True))
    observations = observations_collect(now=now)
    silences = _active_silences(now)
    with transaction.atomic():
        open_alerts = _open_alerts_lock(rules)
        new_alerts, changed, events = _rules_apply(
            rules, observations, open_alerts, silences, now, summary
        )
        Alert.objects.bulk_create(new_alerts)
        events.extend(_opened_events(new_alerts, now, summary))
        Alert.objects.bulk_update(changed, _EVALUATED_FIELDS)
        AlertEvent.objects.bulk_create(events)
        touched = _moved(summary, new_alerts, changed)
        notifications = notifications_create(
            [a for a in touched if a.pk in summary.fired or a.pk in summary.resolved]
        )
        transaction.on_commit(lambda: _after_evaluate(summary, touched, notifications))
    return summary


def _active_silences(now: datetime) -> list[dict[str, Any]]:
    """The matchers of every silence in force at ``now`` (one query)."""
    return [
        dict(s)
        for s in Silence.objects.filter(starts_at__lte=now, ends_at__gt=now).values(
            "rule_id", "target", "cluster_id", "matchers"
        )
    ]


def _open_alerts_lock(rules: list[AlertRule]) -> dict[tuple[int, str], Alert]:
    """Row-lock the unresolved alerts of ``rules``, keyed by (rule id, target) (one query)."""
    return {
        (a.rule_id, a.target): a
        for a in Alert.objects.select_for_update(of=("self",))
        .filter(rule__in=rules, state__in=ACTIVE_STATES)
        .select_related("rule", "cluster", "acknowledged_by")
    }


def _rules_apply(
    rules: list[AlertRule],
    observations: dict[str, list[Observation]],
    open_alerts: dict[tuple[int, str], Alert],
    silences: list[dict[str, Any]],
    now: datetime,
    summary: EvalSummary,
) -> tuple[list[Alert], list[Alert], list[AlertEvent]]:
    """Run every rule over its metric's observations: (alerts to create, open alerts changed, their events)."""
    new_alerts: list[Alert] = []
    changed: list[Alert] = []
    events: list[AlertEvent] = []
    for rule in rules:
        spec = RuleSpec(
            rule.comparison, rule.threshold, rule.resolve_threshold, rule.for_s
        )
        for ob in observations.get(rule.metric, []):
            if rule.cluster_id is not None and ob.cluster_id != rule.cluster_id:
                continue
            current = open_alerts.get((rule.pk, ob.target))
            action = evaluate(
                spec,
                ob.value,
                OpenAlert(current.state, current.pending_at) if current else None,
                now,
            )
            if action is Action.NOTHING:
                continue
            if action in (Action.OPEN_PENDING, Action.OPEN_FIRING):
                new_alerts.append(_alert_new(rule, ob, action, silences, now))
                continue
            assert current is not None  # every other action has an open alert
            event = _alert_move(current, rule, ob, action, silences, now, summary)
            if event is not None:
                events.append(event)
            changed.append(current)
    return new_alerts, changed, events


def _alert_new(
    rule: AlertRule,
    ob: Observation,
    action: Action,
    silences: list[dict[str, Any]],
    now: datetime,
) -> Alert:
    """The unsaved pending (or, with ``for_s`` 0, firing) alert for a target that crossed ``rule``."""
    alert = Alert(
        rule=rule,
        cluster_id=ob.cluster_id,
        node_id=ob.node_id,
        target=ob.target,
        severity=rule.severity,
        value=ob.value,
        peak_value=ob.value,
        labels={
            **rule.labels,
            **ob.labels,
            "rule": rule.name,
            "severity": rule.severity,
        },
        message=_message(rule, ob.target, ob.value),
        fault_onset_at=ob.at or now,  # first bad sample
        pending_at=now,
        last_eval_at=now,
        state=AlertState.FIRING if action is Action.OPEN_FIRING else AlertState.PENDING,
        fired_at=now if action is Action.OPEN_FIRING else None,
    )
    alert.silenced = _is_silenced(silences, alert)
    return alert


def _alert_move(
    current: Alert,
    rule: AlertRule,
    ob: Observation,
    action: Action,
    silences: list[dict[str, Any]],
    now: datetime,
    summary: EvalSummary,
) -> AlertEvent | None:
    """Refresh an open alert's value and apply FIRE, RESOLVE or CLEAR; returns the timeline event (None for UPDATE)."""
    current.value = ob.value
    current.peak_value = _worse(rule.comparison, current.peak_value, ob.value)
    current.last_eval_at = now
    if action is Action.FIRE:
        current.state = AlertState.FIRING
        current.fired_at = now
        current.message = _message(rule, ob.target, ob.value)
        current.silenced = _is_silenced(silences, current)
        summary.fired.append(current.pk)
        return AlertEvent(
            alert=current,
            kind=AlertEventKind.FIRING,
            at=now,
            message=current.message,
            data={"value": ob.value},
        )
    if action in (Action.RESOLVE, Action.CLEAR):
        current.state = AlertState.RESOLVED
        current.resolved_at = now
        kind = (
            AlertEventKind.RESOLVED
            if action is Action.RESOLVE
            else AlertEventKind.CLEARED
        )
        (summary.resolved if action is Action.RESOLVE else summary.cleared).append(
            current.pk
        )
        return AlertEvent(
            alert=current,
            kind=kind,
            at=now,
            message=f"{rule.metric}={ob.value:.4g}",
            data={"value": ob.value},
        )
    return None


def _opened_events(
    new_alerts: list[Alert], now: datetime, summary: EvalSummary
) -> list[AlertEvent]:
    """The timeline of alerts just inserted (pending, then firing and silenced when so); records them in ``summary``."""
    events: list[AlertEvent] = []
    for alert in new_alerts:
        summary.opened.append(alert.pk)
        events.append(
            AlertEvent(
                alert=alert,
                kind=AlertEventKind.PENDING,
                at=alert.fault_onset_at,
                message=alert.message,
                data={"value": alert.value},
            )
        )
        if alert.state == AlertState.FIRING:
            events.append(
                AlertEvent(
                    alert=alert,
                    kind=AlertEventKind.FIRING,
                    at=now,
                    message=alert.message,
                    data={"value": alert.value},
                )
            )
            summary.fired.append(alert.pk)
        if alert.silenced:
            events.append(
                AlertEvent(
                    alert=alert,
                    kind=AlertEventKind.SILENCED,
                    at=now,
                    message="matched an active silence",
                )
            )
    return events


def _moved(
    summary: EvalSummary, new_alerts: list[Alert], changed: list[Alert]
) -> list[Alert]:
    """The alerts whose state moved: every new one, then the open ones that fired, resolved or cleared."""
    moved = {*summary.fired, *summary.resolved, *summary.cleared}
    return [*new_alerts, *(a for a in changed if a.pk in moved)]


def _after_evaluate(
    summary: EvalSummary, alerts: list[Alert], notification_ids: list[int]
) -> None:
    """After commit: queue the notifications, call the remediation seam, publish the alerts."""
    # Late: monitoring.alerts.tasks imports this module (its evaluate task calls alerts_evaluate).
    from monitoring.alerts.tasks import notification_send_task

    for pk in notification_ids:
        notification_send_task.delay(pk)
    # Silenced alerts too: their skipped remediation is recorded, and a resolve still closes.
    for alert in alerts:
        if (
            alert.pk in summary.fired
            and alert.rule.remediation_policy != RemediationPolicy.OFF
        ):
            remediation.alert_firing(alert)
        elif alert.pk in summary.resolved:
            remediation.alert_resolved(alert)
    alerts_publish(alerts)


def _worse(comparison: str, peak: float | None, value: float) -> float:
    """The worse of an alert's peak so far and a new reading, in the rule's direction."""
    if peak is None:
        return value
    return min(peak, value) if comparison in ("lt", "le") else max(peak, value)


def _message(rule: AlertRule, target: str, value: float) -> str:
    """The alert's one-line message: rule, target, value with unit, and the threshold crossed."""
    unit = METRICS[rule.metric].unit if rule.metric in METRICS else ""
    return f"{rule.name}: {target} {rule.metric}={value:.4g}{unit} ({rule.get_comparison_display()} {rule.threshold:g})"[
        :300
    ]


def _is_silenced(silences: list[dict[str, Any]], alert: Alert) -> bool:
    """True when any silence in force matches the alert."""
    return any(
        silence_matches(
            s,
            rule_id=alert.rule_id,
            target=alert.target,
            cluster_id=alert.cluster_id,
            labels=alert.labels,
        )
        for s in silences
    )
