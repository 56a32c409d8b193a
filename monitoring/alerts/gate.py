"""The "Correctness gate failed" alert, raised and resolved from console's gate_finished signal.

The alert is not evaluated from samples (no observation carries ``cluster.gate_failed``,
so ``alerts_evaluate`` leaves it alone): a failed gate opens it naming the failing
samples, the next passing gate on the cluster resolves it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from console.models import GateRun
from monitoring.alerts.publishing import alerts_publish, notifications_create
from monitoring.alerts.tasks import notification_send_task
from monitoring.models.alerts import (
    ACTIVE_STATES,
    Alert,
    AlertEvent,
    AlertEventKind,
    AlertRule,
    AlertState,
    RemediationPolicy,
    Severity,
)

RULE_NAME = "Correctness gate failed"
METRIC = "cluster.gate_failed"


def gate_rule() -> AlertRule:
    """The one rule gate alerts hang on (created on first use; remediation off)."""
    rule, _ = AlertRule.objects.get_or_create(
        name=RULE_NAME,
        defaults={
            "description": "Wrong, garbled or runaway answers to the bundled gate samples",
            "metric": METRIC,
            "scope": "cluster",
            "comparison": "eq",
            "threshold": 1.0,
            "severity": Severity.CRITICAL,
            "remediation_policy": RemediationPolicy.OFF,
        },
    )
    return rule


def _message(run: GateRun) -> str:
    """'gate failed on C: 2/8 samples (arith-add, qa-gold); arith-add: <first problem>' (≤ 300 chars)."""
    failing = [s for s in run.samples if not s.get("passed")]
    ids = ", ".join(s["id"] for s in failing)
    first = failing[0] if failing else None
    why = (first.get("problems") or ["wrong answer"])[0] if first else run.reason
    head = (
        f"correctness gate failed on {run.cluster.name}: "
        f"{len(failing)}/{len(run.samples)} samples ({ids})"
    )
    return f"{head}; {first['id'] if first else 'gate'}: {why}"[:300]


def gate_alert_apply(run: GateRun) -> Alert | None:
    """Open (or refresh) the cluster's gate alert on a failed run; resolve it on a passing one."""
    rule = gate_rule()
    now = timezone.now()
    target = run.cluster.name
    with transaction.atomic():
        current = (
            Alert.objects.select_for_update()
            .filter(rule=rule, target=target, state__in=ACTIVE_STATES)
            .first()
        )
        failing = [s["id"] for s in run.samples if not s.get("passed")]
        if run.passed:
            if current is None:
                return None
            alert = _gate_alert_resolve(current, run, now=now)
        else:
            alert = _gate_alert_fire(current, run, rule, failing, now=now)
        notifications = notifications_create([alert])
        transaction.on_commit(lambda: _after(alert, notifications))
    return alert


def _gate_alert_resolve(current: Alert, run: GateRun, *, now: datetime) -> Alert:
    """The passing run resolves the open gate alert, with a line on its timeline."""
    current.state = AlertState.RESOLVED
    current.resolved_at = now
    current.value = 0.0
    current.save(update_fields=["state", "resolved_at", "value"])
    AlertEvent.objects.create(
        alert=current,
        kind=AlertEventKind.RESOLVED,
        at=now,
        message=f"gate run #{run.pk} passed",
        data={"gate_run": run.pk},
    )
    return current


def _gate_alert_fire(
    current: Alert | None,
    run: GateRun,
    rule: AlertRule,
    failing: list[str],
    *,
    now: datetime,
) -> Alert:
    """The failed run opens the gate alert (firing at once) or refreshes the open one,
    and puts the failing samples on its timeline."""
    message = _message(run)
    labels = {
        "rule": rule.name,
        "severity": rule.severity,
        "gate_run": str(run.pk),
        "failing_samples": ",".join(failing),
    }
    if current is None:
        alert = Alert.objects.create(
            rule=rule,
            cluster=run.cluster,
            target=run.cluster.name,
            severity=rule.severity,
            value=1.0,
            labels=labels,
            message=message,
            fault_onset_at=run.started_at,
            pending_at=now,
            fired_at=now,
            state=AlertState.FIRING,
            last_eval_at=now,
        )
    else:
        alert = current
        alert.message, alert.labels, alert.last_eval_at = message, labels, now
        alert.save(update_fields=["message", "labels", "last_eval_at"])
    AlertEvent.objects.create(
        alert=alert,
        kind=AlertEventKind.FIRING,
        at=now,
        message=message,
        data={
            "gate_run": run.pk,
            "failing_samples": failing,
            "samples": [
                {
                    "id": x["id"],
                    "answer": x["answer"][:200],
                    "problems": x["problems"],
                }
                for x in run.samples
                if not x.get("passed")
            ],
        },
    )
    return alert


def _after(alert: Alert, notification_ids: list[int]) -> None:

    for pk in notification_ids:
        notification_send_task.delay(pk)
    alerts_publish([alert])


def on_gate_finished(sender: Any, gate_run: GateRun, **kwargs: Any) -> None:
    """Receiver of console.signals.gate_finished (connected in MonitoringConfig.ready)."""
    gate_alert_apply(gate_run)
