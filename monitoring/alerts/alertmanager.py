"""The site's Alertmanager as a channel: alerts posted to its API v2, which then owns
routing, grouping, inhibition and silences.

API from Alertmanager's OpenAPI spec (api/v2/openapi.yaml, "postAlerts"): POST
/api/v2/alerts with a list of {labels, annotations, startsAt, endsAt, generatorURL};
an alert whose endsAt has passed is resolved. Like Prometheus (rules/alerting.go
sendAlerts: ValidUntil = now + 4 × max(resend delay, interval)), a firing alert is sent
with endsAt a few resend periods ahead and re-sent every ALERTMANAGER_RESEND_S by
``alertmanager_resend`` (beat), so Alertmanager resolves it on its own only if the
console stops talking to it.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from monitoring.alerts.transport import Transport, console_url, fingerprint, post_json
from monitoring.models import (
    SEVERITY_RANK,
    Alert,
    AlertState,
    ChannelKind,
    NotificationChannel,
)

LABEL_NAME = re.compile(r"[^a-zA-Z0-9_]")


def label_name(key: str) -> str:
    """A Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*) from a rule's free-form label key."""
    name = LABEL_NAME.sub("_", key) or "_"
    return name if not name[0].isdigit() else f"_{name}"


def postable(alert: Alert, status: str) -> dict[str, Any]:
    """One postableAlert for ``status`` "firing" (endsAt ahead) or "resolved" (endsAt = resolved_at)."""
    labels = {label_name(k): str(v) for k, v in alert.labels.items()}
    labels.update(
        alertname=alert.rule.name,
        severity=str(alert.severity),
        target=alert.target,
        source="ascend-console",
    )
    if alert.cluster_id and alert.cluster:
        labels["cluster"] = alert.cluster.name
    if status == "resolved":
        ends = alert.resolved_at or timezone.now()
    else:
        ends = timezone.now() + timedelta(seconds=4 * settings.ALERTMANAGER_RESEND_S)
    return {
        "labels": labels,
        "annotations": {
            "summary": alert.message,
            "value": "" if alert.value is None else f"{alert.value:g}",
            "fingerprint": fingerprint(alert),
        },
        "startsAt": (alert.fired_at or alert.pending_at).isoformat(),
        "endsAt": ends.isoformat(),
        "generatorURL": console_url(alert),
    }


def alerts_url(channel: NotificationChannel) -> str:
    return f"{channel.url.rstrip('/')}/api/v2/alerts"


class AlertmanagerTransport(Transport):
    def send(self, alert: Alert, status: str) -> None:
        post_json(alerts_url(self.channel), [postable(alert, status)])


def alertmanager_resend() -> int:
    """Re-post every firing (or acknowledged), unsilenced alert to each enabled Alertmanager channel (the
    refresh that keeps endsAt ahead). Returns how many alerts were posted; a channel
    that cannot be reached raises TransportError after the others were tried."""
    channels = list(
        NotificationChannel.objects.filter(enabled=True, kind=ChannelKind.ALERTMANAGER)
    )
    if not channels:
        return 0
    firing = list(
        Alert.objects.filter(
            state__in=[AlertState.FIRING, AlertState.ACKNOWLEDGED], silenced=False
        ).select_related("rule", "cluster")
    )
    posted, error = 0, None
    for channel in channels:
        batch = [
            postable(a, "firing")
            for a in firing
            if SEVERITY_RANK[a.severity] >= SEVERITY_RANK[channel.min_severity]
        ]
        if not batch:
            continue
        try:
            post_json(alerts_url(channel), batch)
            posted += len(batch)
        except Exception as exc:  # noqa: BLE001 - try every channel, report the last failure
            error = exc
    if error is not None:
        raise error
    return posted
