"""What an alert transition sends out: pending Notification rows per channel, and ``alert.update`` WebSocket events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.live import publish_many
from monitoring.alerts.selectors import firing_counts
from monitoring.models import (
    SEVERITY_RANK,
    Alert,
    AlertState,
    Notification,
    NotificationChannel,
)

ALERTS_GROUP = "alerts"  # every /ws/alerts/ socket (alerts page + banner)


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


def notifications_create(alerts: list[Alert]) -> list[int]:
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
