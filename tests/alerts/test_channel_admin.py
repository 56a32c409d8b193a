"""Channels are configured in the admin by the admin role; robot keys and signing secrets
never reach an audit row, and the secret is write-only (empty on edit keeps it)."""

from __future__ import annotations

from typing import Any

import pytest

from console.models import AuditEvent
from monitoring.models import NotificationChannel
from tests.conftest import login
from tests.console.test_admin_audit import event_text, post

pytestmark = pytest.mark.django_db
URL = "https://oapi.dingtalk.com/robot/send?access_token=tok-8d1f3c"
SECRET = "SEC0123456789abcdef"


def channel_form(**overrides: str) -> dict[str, str]:
    return {
        "name": "oncall-ding",
        "kind": "dingtalk",
        "url": URL,
        "secret": SECRET,
        "emails": "",
        "format": "generic",
        "min_severity": "warning",
        "send_resolved": "on",
        "enabled": "on",
        **overrides,
    }


def test_it_creates_a_signed_dingtalk_channel_audited_without_its_keys(
    admin: Any,
) -> None:
    client = login(admin)
    post(client, "/admin/monitoring/notificationchannel/add/", channel_form())
    channel = NotificationChannel.objects.get()
    assert (channel.kind, channel.url, channel.secret) == ("dingtalk", URL, SECRET)
    event = AuditEvent.objects.get(action="notificationchannel.create")
    text = event_text(event)
    assert SECRET not in text and "tok-8d1f3c" not in text
    assert event.after["secret_changed"] is True and event.after["url_changed"] is True
    assert event.after["url_host"] == "https://oapi.dingtalk.com/…"
    # the change page never renders the secret back
    page = client.get(f"/admin/monitoring/notificationchannel/{channel.pk}/change/")
    assert page.status_code == 200 and SECRET not in page.content.decode()


def test_it_keeps_the_secret_when_an_edit_leaves_it_empty(admin: Any) -> None:
    channel = NotificationChannel.objects.create(
        name="oncall-ding", kind="dingtalk", url=URL, secret=SECRET
    )
    client = login(admin)
    url = f"/admin/monitoring/notificationchannel/{channel.pk}/change/"
    post(client, url, channel_form(secret="", min_severity="critical"))
    channel.refresh_from_db()
    assert (channel.secret, channel.min_severity) == (SECRET, "critical")
    event = AuditEvent.objects.get(action="notificationchannel.update")
    assert "secret_changed" not in event.after and SECRET not in event_text(event)


def test_it_names_the_missing_url_for_a_robot(admin: Any) -> None:
    response = login(admin).post(
        "/admin/monitoring/notificationchannel/add/",
        channel_form(url="", kind="wecom", secret=""),
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert response.status_code == 200
    assert "Enter the URL this kind of channel posts to." in str(
        response.context["adminform"].form.errors["url"]
    )


def test_it_refuses_channels_to_the_operator_role(operator: Any) -> None:
    NotificationChannel.objects.create(
        name="oncall-ding", kind="dingtalk", url=URL, secret=SECRET
    )
    client = login(operator)
    response = client.get("/admin/monitoring/notificationchannel/")
    assert response.status_code in (302, 403)
    assert (
        SECRET not in response.content.decode()
        and "tok-8d1f3c" not in response.content.decode()
    )
