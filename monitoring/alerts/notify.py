"""Notification transports (registry: kind → dotted path of a Transport class) and the
webhook payloads (generic JSON, Alertmanager webhook v4).

The chat robots and the Alertmanager API v2 channel live beside this module (wecom,
dingtalk, feishu, alertmanager); ``notification_deliver`` is the one place a delivery's
outcome is recorded.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone
from django.utils.module_loading import import_string

from monitoring.alerts.publishing import alert_to_dict
from monitoring.alerts.transport import (
    Transport,
    TransportError,
    console_url,
    fingerprint,
    redacted,
)
from monitoring.models import (
    Alert,
    AlertEvent,
    AlertEventKind,
    DeliveryState,
    Notification,
    NotificationChannel,
    WebhookFormat,
)


def alertmanager_payload(alert: Alert, status: str) -> dict[str, Any]:
    """The Alertmanager webhook JSON (version "4") for one alert transition."""
    labels = {
        "alertname": alert.rule.name,
        "target": alert.target,
        "severity": alert.severity,
        **{k: str(v) for k, v in alert.labels.items()},
    }
    labels["alertname"] = alert.rule.name
    ends = (
        alert.resolved_at.isoformat()
        if status == "resolved" and alert.resolved_at
        else "0001-01-01T00:00:00Z"
    )
    item = {
        "status": status,
        "labels": labels,
        "annotations": {
            "summary": alert.message,
            "value": "" if alert.value is None else f"{alert.value:g}",
        },
        "startsAt": (alert.fired_at or alert.pending_at).isoformat(),
        "endsAt": ends,
        "generatorURL": console_url(alert),
        "fingerprint": fingerprint(alert),
    }
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alert.rule.name}"}}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "ascend-console",
        "groupLabels": {"alertname": alert.rule.name},
        "commonLabels": labels,
        "commonAnnotations": item["annotations"],
        "externalURL": getattr(settings, "CONSOLE_BASE_URL", ""),
        "alerts": [item],
    }


def generic_payload(alert: Alert, status: str) -> dict[str, Any]:
    """The console's own JSON: the alert as the API shows it, plus the transition."""
    return {
        "status": status,
        "alert": alert_to_dict(alert),
        "fingerprint": fingerprint(alert),
    }


class WebhookTransport(Transport):
    def send(self, alert: Alert, status: str) -> None:
        build = (
            alertmanager_payload
            if self.channel.format == WebhookFormat.ALERTMANAGER
            else generic_payload
        )
        body = json.dumps(build(alert, status), default=str)
        try:
            response = httpx.post(
                self.channel.url,
                content=body,
                headers={"Content-Type": "application/json"},
                timeout=settings.ALERT_WEBHOOK_TIMEOUT_S,
            )
        except httpx.HTTPError as exc:
            raise TransportError(
                f"{type(exc).__name__} from {redacted(self.channel.url)}"
            ) from exc
        if response.status_code >= 300:
            # 4xx other than 429 will not get better by retrying.
            permanent = (
                400 <= response.status_code < 500 and response.status_code != 429
            )
            raise TransportError(
                f"HTTP {response.status_code}: {response.text[:200]}",
                permanent=permanent,
            )


class EmailTransport(Transport):
    def send(self, alert: Alert, status: str) -> None:
        to = [a.strip() for a in self.channel.emails.split(",") if a.strip()]
        if not to:
            raise TransportError("channel has no email addresses", permanent=True)
        subject = (
            f"[{status.upper()}] [{alert.severity}] {alert.rule.name} @ {alert.target}"
        )
        body = "\n".join(
            [
                alert.message,
                f"state: {alert.state}",
                f"fault onset: {alert.fault_onset_at.isoformat()}",
                console_url(alert),
            ]
        )
        try:
            send_mail(subject, body, None, to)
        except (
            Exception
        ) as exc:  # SMTP errors come in many classes; all are a failed attempt
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc


TRANSPORTS: dict[str, str] = {
    "webhook": "monitoring.alerts.notify.WebhookTransport",
    "email": "monitoring.alerts.notify.EmailTransport",
    "wecom": "monitoring.alerts.wecom.WeComTransport",
    "dingtalk": "monitoring.alerts.dingtalk.DingTalkTransport",
    "feishu": "monitoring.alerts.feishu.FeishuTransport",
    "alertmanager": "monitoring.alerts.alertmanager.AlertmanagerTransport",
}


def transport_for(channel: NotificationChannel) -> Transport:
    """The channel's transport (TRANSPORTS); an unknown kind is a permanent failure."""
    path = TRANSPORTS.get(channel.kind)
    if path is None:
        raise TransportError(f"no transport for kind {channel.kind!r}", permanent=True)
    transport: Transport = import_string(path)(channel)
    return transport


def notification_deliver(*, notification_id: int, final: bool) -> str:
    """One attempt; records sent, or the error (failed when ``final`` or permanent). Returns the new state.

    Raises TransportError when the attempt failed and should be retried.
    """
    n = Notification.objects.select_related(
        "channel", "alert__rule", "alert__cluster", "alert__acknowledged_by"
    ).get(pk=notification_id)
    if n.state != DeliveryState.PENDING:
        return str(n.state)
    n.attempts += 1
    try:
        transport_for(n.channel).send(n.alert, n.status)
    except TransportError as exc:
        n.last_error = str(exc)[:2000]
        if final or exc.permanent:
            n.state = DeliveryState.FAILED
            n.save(update_fields=["attempts", "last_error", "state"])
            AlertEvent.objects.create(
                alert=n.alert,
                kind=AlertEventKind.NOTIFY_FAILED,
                message=f"{n.channel.name}: {n.last_error}"[:500],
                data={"attempts": n.attempts, "notification": n.pk},
            )
            return str(n.state)
        n.save(update_fields=["attempts", "last_error"])
        raise
    n.state = DeliveryState.SENT
    n.sent_at = timezone.now()
    n.save(update_fields=["attempts", "last_error", "state", "sent_at"])
    AlertEvent.objects.create(
        alert=n.alert,
        kind=AlertEventKind.NOTIFIED,
        message=f"{n.channel.name}: {n.status}",
        data={"attempts": n.attempts, "notification": n.pk},
    )
    return str(n.state)
