"""Rule evaluation over ingested rounds: for, hysteresis, dedup, silences, the remediation seam."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.models import AuditEvent
from monitoring.alerts.services import alerts_evaluate, silence_create
from monitoring.models import (
    Alert,
    AlertEvent,
    AlertRule,
    Incident,
    Notification,
    NotificationChannel,
)
from tests.alerts.helpers import ingest

pytestmark = pytest.mark.django_db

LOSS_20 = {
    0: (1000, 200, 0)
}  # Δtx 1000, Δretry 200 against the base sample → 20 % loss


def kinds(alert: Alert) -> list[str]:
    return list(alert.events.order_by("pk").values_list("kind", flat=True))


def test_it_fires_on_hccs_loss_and_resolves_only_past_the_resolve_threshold(
    cluster: Any, django_capture_on_commit_callbacks: Any
) -> None:
    node = cluster.nodes.get(name="ascend-03")
    t0 = timezone.now()
    ingest(node, t0)
    assert alerts_evaluate(now=t0).opened == []
    ingest(node, t0 + timedelta(seconds=5), advance=LOSS_20)
    with django_capture_on_commit_callbacks(execute=True):
        summary = alerts_evaluate(now=t0 + timedelta(seconds=5))
    alert = Alert.objects.get(rule__name="HCCS link loss")
    assert summary.fired == [alert.pk]
    assert (alert.state, alert.target, alert.node, alert.cluster) == (
        "firing",
        "ascend-03",
        node,
        cluster,
    )
    assert alert.value == pytest.approx(20.0)
    assert alert.fault_onset_at == t0 + timedelta(seconds=5)
    # the rule's policy is auto/failover; the cluster is stopped, so the guardrail
    # records an incident that was skipped and why, instead of restarting anything
    incident = Incident.objects.get(alert=alert)
    assert (incident.action, incident.state) == ("failover", "skipped")
    assert alert.events.filter(
        kind="remediation", message="no action: qwen35-prod is stopped, not serving"
    ).exists()
    # 10 % is under the threshold (15) but not past the resolve threshold (5): still firing
    ingest(node, t0 + timedelta(seconds=10), advance={0: (2000, 300, 0)})
    alerts_evaluate(now=t0 + timedelta(seconds=10))
    alert.refresh_from_db()
    assert alert.state == "firing" and alert.value == pytest.approx(10.0)
    # 1 % → resolved
    ingest(node, t0 + timedelta(seconds=15), advance={0: (3000, 310, 0)})
    summary = alerts_evaluate(now=t0 + timedelta(seconds=15))
    alert.refresh_from_db()
    assert summary.resolved == [alert.pk] and alert.state == "resolved"
    assert alert.resolved_at == t0 + timedelta(seconds=15)
    assert kinds(alert) == ["pending", "firing", "remediation", "resolved"]


def test_it_waits_for_the_for_duration_and_clears_a_pending_alert(cluster: Any) -> None:
    node = cluster.nodes.get(name="ascend-01")
    rule = AlertRule.objects.get(name="NPU temperature high")
    assert rule.for_s == 10
    t0 = timezone.now()
    ingest(node, t0, temp=91.0)
    alerts_evaluate(now=t0)
    alert = Alert.objects.get(rule=rule)
    assert (alert.state, alert.target, alert.fault_onset_at) == (
        "pending",
        "ascend-01/npu3.0",
        t0,
    )
    ingest(node, t0 + timedelta(seconds=5), temp=92.0)
    alerts_evaluate(now=t0 + timedelta(seconds=5))
    alert.refresh_from_db()
    assert alert.state == "pending"
    ingest(node, t0 + timedelta(seconds=10), temp=93.0)
    alerts_evaluate(now=t0 + timedelta(seconds=10))
    alert.refresh_from_db()
    assert alert.state == "firing" and alert.fired_at == t0 + timedelta(seconds=10)
    assert alert.fault_onset_at == t0  # the first bad sample, not the firing time
    # a second target that is bad only once is cleared, never fires
    ingest(node, t0 + timedelta(seconds=15), temp=70.0)
    alerts_evaluate(now=t0 + timedelta(seconds=15))
    alert.refresh_from_db()
    assert alert.state == "resolved"


def test_it_clears_a_pending_alert_that_recovers_before_for(cluster: Any) -> None:
    node = cluster.nodes.get(name="ascend-01")
    t0 = timezone.now()
    ingest(node, t0, temp=91.0)
    alerts_evaluate(now=t0)
    ingest(node, t0 + timedelta(seconds=5), temp=50.0)
    summary = alerts_evaluate(now=t0 + timedelta(seconds=5))
    alert = Alert.objects.get(rule__name="NPU temperature high")
    assert (
        summary.cleared == [alert.pk]
        and alert.state == "resolved"
        and alert.fired_at is None
    )
    assert kinds(alert) == ["pending", "cleared"]


def test_it_keeps_one_open_alert_per_rule_and_target(cluster: Any) -> None:
    node = cluster.nodes.get(name="ascend-03")
    t0 = timezone.now()
    ingest(node, t0, roce_down=2)
    alerts_evaluate(now=t0)
    ingest(node, t0 + timedelta(seconds=5), roce_down=2)
    alerts_evaluate(now=t0 + timedelta(seconds=5))
    alerts = Alert.objects.filter(rule__name="RoCE NIC down")
    assert alerts.count() == 1
    alert = alerts.get()
    assert alert.labels["ports"] == "2" and alert.state == "firing"
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(
            rule=alert.rule,
            target=alert.target,
            severity="critical",
            fault_onset_at=t0,
            pending_at=t0,
        )


def test_it_silences_notifications_and_remediation(
    cluster: Any, operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    NotificationChannel.objects.create(
        name="hook", kind="webhook", url="http://127.0.0.1:9/x"
    )
    node = cluster.nodes.get(name="ascend-03")
    rule = AlertRule.objects.get(name="HCCS link loss")
    silence_create(
        user=operator,
        ends_at=timezone.now() + timedelta(hours=1),
        rule=rule,
        target="ascend-03",
        comment="maintenance",
    )
    t0 = timezone.now()
    ingest(node, t0)
    ingest(node, t0 + timedelta(seconds=5), advance=LOSS_20)
    with django_capture_on_commit_callbacks(execute=True):
        alerts_evaluate(now=t0 + timedelta(seconds=5))
    alert = Alert.objects.get(rule=rule)
    assert alert.state == "firing" and alert.silenced
    assert Notification.objects.count() == 0
    assert not Incident.objects.exists()  # nothing acted
    (skip,) = AlertEvent.objects.filter(
        kind="remediation"
    )  # but the decision is on record
    assert skip.data["decision"] == "skip" and "silenced" in skip.message
    assert AuditEvent.objects.filter(
        action="remediation.skip", result="denied"
    ).exists()
    assert "silenced" in kinds(alert)


def test_it_notifies_each_matching_channel_once_per_transition(
    cluster: Any, django_capture_on_commit_callbacks: Any
) -> None:
    NotificationChannel.objects.create(
        name="crit-only", kind="email", emails="a@example.com", min_severity="critical"
    )
    NotificationChannel.objects.create(
        name="off", kind="email", emails="b@example.com", enabled=False
    )
    node = cluster.nodes.get(name="ascend-03")
    t0 = timezone.now()
    ingest(node, t0)
    ingest(
        node, t0 + timedelta(seconds=5), advance=LOSS_20, temp=91.0
    )  # critical HCCS + warning temp (pending)
    alerts_evaluate(now=t0 + timedelta(seconds=5))
    assert list(
        Notification.objects.values_list("channel__name", "status", "alert__rule__name")
    ) == [("crit-only", "firing", "HCCS link loss")]
