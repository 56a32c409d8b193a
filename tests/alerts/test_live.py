"""A firing alert is pushed over /ws/alerts/ (Redis channel layer); emails go through Django's backend."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core import mail
from django.utils import timezone

from console.asgi import application
from monitoring.alerts.notify import alertmanager_payload, notification_deliver
from monitoring.alerts.services import alerts_evaluate
from monitoring.models import Alert, Notification, NotificationChannel
from tests.alerts.helpers import ingest
from tests.monitoring.test_consumers import ORIGIN, session_headers


def _fire(cluster: Any) -> None:
    node = cluster.nodes.get(name="ascend-03")
    t0 = timezone.now()
    ingest(node, t0)
    ingest(node, t0 + timedelta(seconds=5), advance={0: (1000, 200, 0)})
    alerts_evaluate(now=t0 + timedelta(seconds=5))


@pytest.mark.django_db(transaction=True)
async def test_it_pushes_a_firing_alert_to_the_alerts_socket(
    cluster: Any, viewer: Any
) -> None:
    headers = await sync_to_async(session_headers)(viewer)
    comm = WebsocketCommunicator(application, "/ws/alerts/", headers=headers)
    connected, _ = await comm.connect()
    assert connected
    assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
    await sync_to_async(_fire)(cluster)
    message = await comm.receive_json_from(timeout=10)
    assert message["type"] == "alert.update"
    assert (
        message["alert"]["rule"] == "HCCS link loss"
        and message["alert"]["state"] == "firing"
    )
    assert message["alert"]["target"] == "ascend-03" and message["firing_critical"] == 1
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_it_refuses_anonymous_alert_sockets() -> None:
    comm = WebsocketCommunicator(
        application, "/ws/alerts/", headers=[ORIGIN, (b"host", b"127.0.0.1")]
    )
    connected, code = await comm.connect()
    assert not connected and code == 4403
    await comm.disconnect()


@pytest.mark.django_db
def test_it_emails_through_the_django_backend(cluster: Any) -> None:
    NotificationChannel.objects.create(
        name="oncall", kind="email", emails="oncall@example.com, lead@example.com"
    )
    _fire(cluster)
    n = Notification.objects.get()
    assert notification_deliver(notification_id=n.pk, final=False) == "sent"
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == ["oncall@example.com", "lead@example.com"]
    assert sent.subject == "[FIRING] [critical] HCCS link loss @ ascend-03"
    n.refresh_from_db()
    assert (n.state, n.attempts) == ("sent", 1)
    assert n.alert.events.filter(kind="notified").exists()


@pytest.mark.django_db
def test_it_builds_the_alertmanager_v4_payload(cluster: Any) -> None:
    _fire(cluster)
    alert = Alert.objects.get()
    body = alertmanager_payload(alert, "firing")
    assert body["version"] == "4" and body["status"] == "firing"
    item = body["alerts"][0]
    assert (
        item["labels"]["alertname"] == "HCCS link loss"
        and item["labels"]["severity"] == "critical"
    )
    assert (
        item["labels"]["node"] == "ascend-03"
        and item["endsAt"] == "0001-01-01T00:00:00Z"
    )
    assert (
        item["startsAt"] == alert.fired_at.isoformat()
        and len(item["fingerprint"]) == 16
    )
