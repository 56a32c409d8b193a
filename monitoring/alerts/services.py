"""Writes of alerting an operator makes: acknowledge, silence, edit and seed rules. Every user action is audited.

Evaluation after a collect round lives in ``monitoring.alerts.evaluation`` and what a
transition sends out in ``monitoring.alerts.publishing``; their public names are
re-exported here so ``monitoring.alerts.services`` stays the one door to alerting's writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from console.services.audit import audit_record, snapshot
from monitoring.alerts.catalog import DEFAULT_RULES, METRICS
from monitoring.alerts.evaluation import EvalSummary, alerts_evaluate
from monitoring.alerts.publishing import ALERTS_GROUP, alert_to_dict, alerts_publish
from monitoring.alerts.rules import silence_matches
from monitoring.models.alerts import (
    ACTIVE_STATES,
    Alert,
    AlertEvent,
    AlertEventKind,
    AlertRule,
    AlertState,
    Silence,
)

__all__ = [
    "ALERTS_GROUP",
    "EvalSummary",
    "alert_acknowledge",
    "alert_rules_seed",
    "alert_to_dict",
    "alerts_evaluate",
    "alerts_publish",
    "rule_delete",
    "rule_save",
    "silence_create",
]


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
        hits = _alerts_silence_hits(
            silence, rule=rule, target=target, cluster_id=cluster_id, matchers=matchers
        )
        _alerts_mark_silenced(
            hits, user=user, ends_at=ends_at, comment=comment, now=now
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


def _alerts_silence_hits(
    silence: Silence,
    *,
    rule: AlertRule | None,
    target: str,
    cluster_id: int | None,
    matchers: dict[str, Any] | None,
) -> list[Alert]:
    """The open, not yet silenced alerts the new silence matches (narrowed in SQL first)."""
    spec = {
        "rule_id": silence.rule_id,
        "target": target,
        "cluster_id": cluster_id,
        "matchers": matchers or {},
    }
    qs = Alert.objects.filter(state__in=ACTIVE_STATES, silenced=False).select_related(
        "rule", "cluster"
    )
    if rule is not None:
        qs = qs.filter(rule=rule)
    if target:
        qs = qs.filter(target=target)
    if cluster_id is not None:
        qs = qs.filter(Q(cluster_id=cluster_id))
    return [
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


def _alerts_mark_silenced(
    hits: list[Alert], *, user: Any, ends_at: datetime, comment: str, now: datetime
) -> None:
    """Mark ``hits`` silenced (in the database and in memory), each with a timeline line."""
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
