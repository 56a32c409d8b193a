"""Celery tasks of alerting (thin): evaluate after each round, deliver one notification with retries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from console.celery import app
from monitoring.alerts.alertmanager import alertmanager_resend
from monitoring.alerts.evaluation import alerts_evaluate
from monitoring.alerts.notify import notification_deliver
from monitoring.alerts.transport import TransportError
from monitoring.remediation import remediation_retry
from monitoring.store import redis_client


@app.task(name="monitoring.alerts_evaluate", ignore_result=True)
def alerts_evaluate_task(round_ts: float | None = None) -> dict[str, list[int]]:
    """Evaluate every enabled rule against the round that started at ``round_ts`` (epoch seconds)."""
    now = datetime.fromtimestamp(round_ts, tz=UTC) if round_ts else None
    # One evaluation at a time: two at once would both open the same alert (the constraint would refuse one).
    with redis_client().lock(
        "monitoring:alerts:evaluate", timeout=120, blocking_timeout=60
    ):
        return alerts_evaluate(now=now).to_dict()


@app.task(name="monitoring.notification_send", bind=True, ignore_result=True)
def notification_send_task(self: Any, notification_id: int) -> str:
    """Deliver one notification; retried with exponential backoff up to ALERT_NOTIFY_MAX_RETRIES, then failed."""
    final = self.request.retries >= settings.ALERT_NOTIFY_MAX_RETRIES
    try:
        return notification_deliver(notification_id=notification_id, final=final)
    except TransportError as exc:
        countdown = settings.ALERT_NOTIFY_BACKOFF_S * (2**self.request.retries)
        raise self.retry(
            exc=exc, countdown=countdown, max_retries=settings.ALERT_NOTIFY_MAX_RETRIES
        ) from exc


@app.task(name="monitoring.alertmanager_resend", ignore_result=True)
def alertmanager_resend_task() -> int:
    """Keep open alerts alive in the site's Alertmanager (see monitoring.alerts.alertmanager)."""

    return alertmanager_resend()


@app.task(name="monitoring.remediation_retry", ignore_result=True)
def remediation_retry_task(incident_id: int) -> None:
    """After the backoff: try the incident's remedy again (monitoring.remediation)."""
    remediation_retry(incident_id)
