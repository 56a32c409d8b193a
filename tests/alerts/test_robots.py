"""WeCom, DingTalk and Feishu robots: each delivery reaches a real local HTTP endpoint in the
vendor's documented format (JSON Schema), signed as documented, for firing and resolved
transitions; vendor error codes end in failed (or retried) deliveries without leaking keys."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import jsonschema
import pytest
from django.utils import timezone

from monitoring.alerts.notify import notification_deliver
from monitoring.alerts.services import alerts_evaluate
from monitoring.alerts.transport import TransportError
from monitoring.models import Alert, Notification, NotificationChannel
from tests.alerts.helpers import ingest
from tests.alerts.receiver import Received, receiver
from tests.alerts.robot_schemas import (
    DINGTALK_MARKDOWN,
    FEISHU_INTERACTIVE,
    WECOM_MARKDOWN,
    dingtalk_signature_ok,
    feishu_signature_ok,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _base_url(settings: Any) -> None:
    settings.CONSOLE_BASE_URL = "https://console.example.gov.cn"


WECOM_KEY = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa"
DING_TOKEN, DING_SECRET = "d4a1c0ffee", "SECbd0e7bbd4aa5b1f3e0a4d7c1"
FEISHU_TOKEN, FEISHU_SECRET = "0a1b2c3d-feed", "qbTKpvQq8vGdr2h9HfxnHc"


def fire(cluster: Any) -> tuple[Alert, Any]:
    node = cluster.nodes.get(name="ascend-03")
    t0 = timezone.now() - timedelta(seconds=30)
    ingest(node, t0)
    ingest(
        node, t0 + timedelta(seconds=5), advance={0: (1000, 200, 0)}
    )  # 20 % HCCS loss
    alerts_evaluate(now=t0 + timedelta(seconds=5))
    return Alert.objects.get(rule__name="HCCS link loss"), (node, t0)


def resolve(ctx: Any) -> None:
    node, t0 = ctx
    ingest(node, t0 + timedelta(seconds=10), advance={0: (2000, 300, 0)})
    alerts_evaluate(now=t0 + timedelta(seconds=10))
    ingest(node, t0 + timedelta(seconds=15), advance={0: (3000, 310, 0)})
    alerts_evaluate(now=t0 + timedelta(seconds=15))


def deliver(status: str) -> str:
    n = Notification.objects.get(status=status, state="pending")
    return notification_deliver(notification_id=n.pk, final=False)


def wecom_reply(got: Received) -> tuple[int, dict[str, Any]]:
    if got.path != "/cgi-bin/webhook/send" or got.query.get("key") != WECOM_KEY:
        return 200, {"errcode": 93000, "errmsg": "invalid webhook url"}
    jsonschema.validate(got.body, WECOM_MARKDOWN)
    if len(got.body["markdown"]["content"].encode()) > 4096:
        return 200, {
            "errcode": 40058,
            "errmsg": "markdown.content exceed max length 4096",
        }
    return 200, {"errcode": 0, "errmsg": "ok"}


def test_it_posts_wecom_markdown_for_firing_and_resolved(cluster: Any) -> None:
    with receiver(wecom_reply) as server:
        NotificationChannel.objects.create(
            name="oncall-wecom",
            kind="wecom",
            url=f"{server.url}/cgi-bin/webhook/send?key={WECOM_KEY}",
        )
        alert, ctx = fire(cluster)
        assert deliver("firing") == "sent"
        resolve(ctx)
        assert deliver("resolved") == "sent"
    firing, resolved = (r.body["markdown"]["content"] for r in server.requests)
    assert firing.startswith('## <font color="warning">[FIRING] HCCS link loss</font>')
    for needle in (
        "Severity: **critical**",
        "Target: **ascend-03**",
        "Value: **20 (threshold 15)**",
        "Cluster: **qwen35-prod**",
        f"https://console.example.gov.cn/alerts/#alert-{alert.pk}",
    ):
        assert needle in firing, needle
    assert resolved.startswith('## <font color="info">[RESOLVED] HCCS link loss</font>')
    assert "Resolved at" in resolved


def test_it_fails_a_wecom_delivery_on_errcode_without_leaking_the_key(
    cluster: Any,
) -> None:
    with receiver(wecom_reply) as server:
        NotificationChannel.objects.create(
            name="oncall-wecom",
            kind="wecom",
            url=f"{server.url}/cgi-bin/webhook/send?key=revoked",
        )
        alert, _ctx = fire(cluster)
        assert deliver("firing") == "failed"  # 93000 will not get better by retrying
    n = Notification.objects.get()
    assert (
        n.last_error.startswith("WeCom errcode 93000") and "revoked" not in n.last_error
    )
    event = alert.events.get(kind="notify_failed")
    assert "revoked" not in event.message


def dingtalk_reply(got: Received) -> tuple[int, dict[str, Any]]:
    if got.path != "/robot/send" or got.query.get("access_token") != DING_TOKEN:
        return 200, {"errcode": 300001, "errmsg": "token is not exist"}
    if not dingtalk_signature_ok(got.query, DING_SECRET):
        return 200, {"errcode": 310000, "errmsg": "sign not match"}
    jsonschema.validate(got.body, DINGTALK_MARKDOWN)
    return 200, {"errcode": 0, "errmsg": "ok"}


def test_it_signs_dingtalk_requests_and_posts_markdown(cluster: Any) -> None:
    with receiver(dingtalk_reply) as server:
        NotificationChannel.objects.create(
            name="oncall-ding", kind="dingtalk", secret=DING_SECRET,
            url=f"{server.url}/robot/send?access_token={DING_TOKEN}",
        )  # fmt: skip
        alert, ctx = fire(cluster)
        assert deliver("firing") == "sent"
        resolve(ctx)
        assert deliver("resolved") == "sent"
    firing, resolved = server.requests
    # the signature travels URL-encoded, as the doc's sample does: Base64 of 32 bytes ends
    # in one "=" pad, which must arrive as %3D (a raw "+" would arrive as a space)
    raw_sign = firing.raw_query.split("sign=")[1].split("&")[0]
    assert raw_sign.endswith("%3D") and not set("+/=") & set(raw_sign)
    assert firing.body["markdown"]["title"] == "[FIRING] HCCS link loss"
    text = firing.body["markdown"]["text"]
    for needle in (
        "**critical**",
        "**ascend-03**",
        "**20 (threshold 15)**",
        f"#alert-{alert.pk}",
    ):
        assert needle in text, needle
    assert resolved.body["markdown"]["title"] == "[RESOLVED] HCCS link loss"


def test_it_fails_a_dingtalk_delivery_signed_with_the_wrong_secret(
    cluster: Any,
) -> None:
    with receiver(dingtalk_reply) as server:
        NotificationChannel.objects.create(
            name="oncall-ding", kind="dingtalk", secret="SECwrong",
            url=f"{server.url}/robot/send?access_token={DING_TOKEN}",
        )  # fmt: skip
        fire(cluster)
        assert deliver("firing") == "failed"
    n = Notification.objects.get()
    assert n.last_error == "DingTalk errcode 310000: sign not match"
    assert DING_TOKEN not in n.last_error


def test_it_retries_a_dingtalk_delivery_that_was_rate_limited(cluster: Any) -> None:
    def too_fast(got: Received) -> tuple[int, dict[str, Any]]:
        return 200, {
            "errcode": 130101,
            "errmsg": "send too fast, exceed 20 times per minute",
        }

    with receiver(too_fast) as server:
        NotificationChannel.objects.create(
            name="oncall-ding",
            kind="dingtalk",
            url=f"{server.url}/robot/send?access_token=x",
        )
        fire(cluster)
        with pytest.raises(TransportError):
            deliver("firing")
    n = Notification.objects.get()
    assert (n.state, n.attempts) == ("pending", 1)  # Celery retries it with backoff


def feishu_reply(got: Received) -> tuple[int, dict[str, Any]]:
    if got.path != f"/open-apis/bot/v2/hook/{FEISHU_TOKEN}":
        return 404, {
            "code": 19001,
            "msg": "param invalid: incoming webhook access token invalid",
        }
    if not feishu_signature_ok(got.body, FEISHU_SECRET):
        return 200, {
            "code": 19021,
            "msg": "sign match fail or timestamp is not within one hour from current time",
        }
    if len(json.dumps(got.body).encode()) > 20 * 1024:
        return 200, {"code": 9499, "msg": "Bad Request"}
    jsonschema.validate(got.body, FEISHU_INTERACTIVE)
    return 200, {"code": 0, "msg": "success", "data": {}}


def test_it_signs_feishu_cards_for_firing_and_resolved(cluster: Any) -> None:
    with receiver(feishu_reply) as server:
        NotificationChannel.objects.create(
            name="oncall-feishu", kind="feishu", secret=FEISHU_SECRET,
            url=f"{server.url}/open-apis/bot/v2/hook/{FEISHU_TOKEN}",
        )  # fmt: skip
        alert, ctx = fire(cluster)
        assert deliver("firing") == "sent"
        resolve(ctx)
        assert deliver("resolved") == "sent"
    firing, resolved = (r.body["card"] for r in server.requests)
    assert firing["header"]["template"] == "red"
    assert firing["header"]["title"]["content"] == "[FIRING] HCCS link loss"
    body = firing["elements"][0]["content"]
    assert "**Severity**: critical" in body and "**Target**: ascend-03" in body
    assert "**Value**: 20 (threshold 15)" in body
    button = firing["elements"][1]["actions"][0]
    assert button["url"] == f"https://console.example.gov.cn/alerts/#alert-{alert.pk}"
    assert resolved["header"]["template"] == "green"
    assert resolved["header"]["title"]["content"] == "[RESOLVED] HCCS link loss"


def test_it_fails_a_feishu_delivery_signed_with_the_wrong_secret(cluster: Any) -> None:
    with receiver(feishu_reply) as server:
        NotificationChannel.objects.create(
            name="oncall-feishu", kind="feishu", secret="not-the-secret",
            url=f"{server.url}/open-apis/bot/v2/hook/{FEISHU_TOKEN}",
        )  # fmt: skip
        fire(cluster)
        assert deliver("firing") == "failed"
    assert Notification.objects.get().last_error.startswith("Feishu code 19021")
