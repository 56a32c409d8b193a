"""Writes of alerting: evaluate rules after a round, acknowledge, silence, edit rules. Every user action is audited."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from console.live import publish_many
from console.services.audit import audit_record, snapshot
from monitoring import remediation
from monitoring.alerts.catalog import DEFAULT_RULES, METRICS
from monitoring.alerts.rules import (
    Action,
    OpenAlert,
    RuleSpec,
    evaluate,
    silence_matches,
)
from monitoring.alerts.selectors import firing_counts, observations_collect
from monitoring.models.alerts import (
    ACTIVE_STATES,
    SEVERITY_RANK,
    Alert,
    AlertEvent,
    AlertEventKind,
    AlertRule,
    AlertState,
    Notification,
    NotificationChannel,
    RemediationPolicy,
    Silence,
)

ALERTS_GROUP = "alerts"  # every /ws/alerts/ socket (alerts page + banner)


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


def alert_to_dict(alert: Alert) -> dict[str, Any]:
    """The JSON shape pushed over WebSockets and returned by the API."""

    def ts(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {
        "id": alert.pk,
        "rule": alert.rule.name,
        "rule_id": alert.rule_id,
        "metric": alert.rule.metric,
        "target": alert.target,
        "cluster": alert.cluster.name if alert.cluster_id and alert.cluster else None,
        "state": alert.state,
        "severity": alert.severity,
        "value": alert.value,
        "peak_value": alert.peak_value,
        "threshold": alert.rule.threshold,
        "message": alert.message,
        "labels": alert.labels,
        "silenced": alert.silenced,
        "fault_onset_at": ts(alert.fault_onset_at),
        "pending_at": ts(alert.pending_at),
        "fired_at": ts(alert.fired_at),
        "acknowledged_at": ts(alert.acknowledged_at),
        "acknowledged_by": alert.acknowledged_by.username
        if alert.acknowledged_by_id and alert.acknowledged_by
        else None,
        "resolved_at": ts(alert.resolved_at),
    }


def _worse(comparison: str, peak: float | None, value: float) -> float:
    """The worse of an alert's peak so far and a new reading, in the rule's direction."""
    if peak is None:
        return value
    return min(peak, value) if comparison in ("lt", "le") else max(peak, value)


def _message(rule: AlertRule, target: str, value: float) -> str:
    unit = METRICS[rule.metric].unit if rule.metric in METRICS else ""
    return f"{rule.name}: {target} {rule.metric}={value:.4g}{unit} ({rule.get_comparison_display()} {rule.threshold:g})"[
        :300
    ]


def _active_silences(now: datetime) -> list[dict[str, Any]]:
    return [
        dict(s)
        for s in Silence.objects.filter(starts_at__lte=now, ends_at__gt=now).values(
            "rule_id", "target", "cluster_id", "matchers"
        )
    ]


def _is_silenced(silences: list[dict[str, Any]], alert: Alert) -> bool:
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
        open_alerts = {
            (a.rule_id, a.target): a
            for a in Alert.objects.select_for_update(of=("self",))
            .filter(rule__in=rules, state__in=ACTIVE_STATES)
            .select_related("rule", "cluster", "acknowledged_by")
        }
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
                        state=AlertState.FIRING
                        if action is Action.OPEN_FIRING
                        else AlertState.PENDING,
                        fired_at=now if action is Action.OPEN_FIRING else None,
                    )
                    alert.silenced = _is_silenced(silences, alert)
                    new_alerts.append(alert)
                    continue
                assert current is not None  # every other action has an open alert
                current.value = ob.value
                current.peak_value = _worse(
                    rule.comparison, current.peak_value, ob.value
                )
                current.last_eval_at = now
                if action is Action.FIRE:
                    current.state = AlertState.FIRING
                    current.fired_at = now
                    current.message = _message(rule, ob.target, ob.value)
                    current.silenced = _is_silenced(silences, current)
                    events.append(
                        AlertEvent(
                            alert=current,
                            kind=AlertEventKind.FIRING,
                            at=now,
                            message=current.message,
                            data={"value": ob.value},
                        )
                    )
                    summary.fired.append(current.pk)
                elif action in (Action.RESOLVE, Action.CLEAR):
                    current.state = AlertState.RESOLVED
                    current.resolved_at = now
                    kind = (
                        AlertEventKind.RESOLVED
                        if action is Action.RESOLVE
                        else AlertEventKind.CLEARED
                    )
                    events.append(
                        AlertEvent(
                            alert=current,
                            kind=kind,
                            at=now,
                            message=f"{rule.metric}={ob.value:.4g}",
                            data={"value": ob.value},
                        )
                    )
                    (
                        summary.resolved
                        if action is Action.RESOLVE
                        else summary.cleared
                    ).append(current.pk)
                changed.append(current)
        Alert.objects.bulk_create(new_alerts)
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
        Alert.objects.bulk_update(
            changed,
            [
                "state",
                "value",
                "peak_value",
                "last_eval_at",
                "fired_at",
                "resolved_at",
                "message",
                "silenced",
            ],
        )
        AlertEvent.objects.bulk_create(events)
        moved = {*summary.fired, *summary.resolved, *summary.cleared}
        touched = [*new_alerts, *(a for a in changed if a.pk in moved)]
        notifications = _notifications_create(
            [a for a in touched if a.pk in summary.fired or a.pk in summary.resolved]
        )
        transaction.on_commit(lambda: _after_evaluate(summary, touched, notifications))
    return summary


def _notifications_create(alerts: list[Alert]) -> list[int]:
    """One pending Notification per (alert transition, matching channel); silenced alerts notify nobody."""
    channels = list(NotificationChannel.objects.filter(enabled=True))
    rows = []
    for alert in alerts:
        if alert.silenced:
            continue
        status = "resolved" if alert.state == AlertState.RESOLVED else "firing"
        for channel in channels:
            if SEVERITY_RANK[alert.severity] < SEVERITY_RANK[channel.min_severity]:
                continue
            if status == "resolved" and not channel.send_resolved:
                continue
            rows.append(Notification(channel=channel, alert=alert, status=status))
    Notification.objects.bulk_create(rows)
    return [n.pk for n in rows]


def _after_evaluate(
    summary: EvalSummary, alerts: list[Alert], notification_ids: list[int]
) -> None:
    # Late: monitoring.alerts.tasks imports this module (its tasks call these services).
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


def alerts_publish(alerts: list[Alert]) -> None:
    """Push ``alert.update`` to the alerts group and each alert's cluster group, with the banner count."""
    if not alerts:
        return

    counts = firing_counts()
    count, warnings = counts["critical"], counts["warning"]
    events: list[tuple[str, str, dict[str, Any]]] = []
    for alert in alerts:
        payload = {
            "alert": alert_to_dict(alert),
            "firing_critical": count,
            "firing_warning": warnings,
        }
        events.append((ALERTS_GROUP, "alert.update", payload))
        if alert.cluster_id:
            events.append((f"cluster-{alert.cluster_id}", "alert.update", payload))
    publish_many(events)


def alert_acknowledge(
    *, alert: Alert, user: Any, request: HttpRequest | None = None
) -> Alert:
    """Firing → acknowledged by ``user``; raises ValueError if the alert is not firing. Audited."""
    now = timezone.now()
    with transaction.atomic():
        updated = Alert.objects.filter(pk=alert.pk, state=AlertState.FIRING).update(
            state=AlertState.ACKNOWLEDGED, acknowledged_at=now, acknowledged_by=user
        )
        refused = updated != 1
        if not refused:
            alert.refresh_from_db()
            AlertEvent.objects.create(
                alert=alert,
                kind=AlertEventKind.ACKNOWLEDGED,
                at=now,
                actor=user,
                message=f"acknowledged by {user.username}",
            )
            audit_record(
                action="alert.acknowledge",
                actor=user,
                request=request,
                target=alert,
                after={"state": alert.state},
            )
            transaction.on_commit(lambda: alerts_publish([alert]))
    if refused:
        # outside the block: the refusal's audit row must not roll back with the raise
        audit_record(
            action="alert.acknowledge",
            actor=user,
            request=request,
            target=alert,
            result="failure",
            message=f"alert is {alert.state}, not firing",
        )
        raise ValueError(
            f"alert is {alert.state}; only a firing alert can be acknowledged"
        )
    return alert


def silence_create(
    *,
    user: Any,
    ends_at: datetime,
    rule: AlertRule | None = None,
    target: str = "",
    cluster_id: int | None = None,
    matchers: dict[str, Any] | None = None,
    comment: str = "",
    request: HttpRequest | None = None,
) -> Silence:
    """Create a silence and mark matching open alerts silenced; raises ValueError without a matcher or a past end."""
    now = timezone.now()
    if ends_at <= now:
        raise ValueError("ends_at must be in the future")
    if rule is None and not target and cluster_id is None and not matchers:
        raise ValueError("give at least one of rule, target, cluster or matchers")
    with transaction.atomic():
        silence = Silence.objects.create(
            rule=rule,
            target=target,
            cluster_id=cluster_id,
            matchers=matchers or {},
            ends_at=ends_at,
            comment=comment,
            created_by=user,
            starts_at=now,
        )
        spec = {
            "rule_id": silence.rule_id,
            "target": target,
            "cluster_id": cluster_id,
            "matchers": matchers or {},
        }
        qs = Alert.objects.filter(
            state__in=ACTIVE_STATES, silenced=False
        ).select_related("rule", "cluster")
        if rule is not None:
            qs = qs.filter(rule=rule)
        if target:
            qs = qs.filter(target=target)
        if cluster_id is not None:
            qs = qs.filter(Q(cluster_id=cluster_id))
        hits = [
            a
            for a in qs
            if silence_matches(
                spec,
                rule_id=a.rule_id,
                target=a.target,
                cluster_id=a.cluster_id,
                labels=a.labels,
            )
        ]
        Alert.objects.filter(pk__in=[a.pk for a in hits]).update(silenced=True)
        for a in hits:
            a.silenced = True
        AlertEvent.objects.bulk_create(
            [
                AlertEvent(
                    alert=a,
                    kind=AlertEventKind.SILENCED,
                    at=now,
                    actor=user,
                    message=f"silenced until {ends_at.isoformat()}: {comment}"[:500],
                )
                for a in hits
            ]
        )
        audit_record(
            action="silence.create",
            actor=user,
            request=request,
            target=silence,
            after={**(snapshot(silence) or {}), "alerts": [a.pk for a in hits]},
        )
        transaction.on_commit(lambda: alerts_publish(hits))
    return silence


def rule_save(
    *,
    rule: AlertRule | None,
    data: dict[str, Any],
    user: Any,
    request: HttpRequest | None = None,
) -> AlertRule:
    """Create (rule=None) or update a rule from validated data; the scope follows the metric. Audited."""
    with transaction.atomic():
        before = snapshot(rule) if rule is not None else None
        rule = rule or AlertRule()
        for key, value in data.items():
            if key in AlertRule.EDITABLE_FIELDS:
                setattr(rule, key, value)
        rule.scope = METRICS[rule.metric].scope
        rule.save()
        audit_record(
            action="alert_rule.update" if before else "alert_rule.create",
            actor=user,
            request=request,
            target=rule,
            before=before,
            after=snapshot(rule),
        )
    return rule


def rule_delete(
    *, rule: AlertRule, user: Any, request: HttpRequest | None = None
) -> None:
    """Delete a rule with its alerts and history. Audited."""
    with transaction.atomic():
        before = snapshot(rule)
        audit_record(
            action="alert_rule.delete",
            actor=user,
            request=request,
            target=rule,
            before=before,
        )
        rule.delete()


def alert_rules_seed() -> int:
    """Create the field guide's rules that are missing (by name); returns how many were created.

    Migration 0002 seeds them once; this is for databases flushed afterwards (tests,
    ``manage.py flush``) and never overwrites an admin's edits.
    """
    created = 0
    for spec in DEFAULT_RULES:
        fields = dict(spec)
        fields["scope"] = METRICS[str(fields["metric"])].scope
        _, was_created = AlertRule.objects.get_or_create(
            name=fields.pop("name"), defaults=fields
        )
        created += int(was_created)
    return created
