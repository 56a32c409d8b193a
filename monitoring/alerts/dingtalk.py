"""DingTalk (钉钉) custom robot: a markdown message, signed when the robot uses 加签.

Signed-request mode, from DingTalk's "自定义机器人安全设置"
(https://open.dingtalk.com/document/robots/customize-robot-security-settings):
string_to_sign = timestamp + "\\n" + secret (timestamp in milliseconds, within one hour
of DingTalk's clock), HmacSHA256 keyed with the secret, Base64, then URL-encoded, sent
as the ``timestamp`` and ``sign`` query parameters beside ``access_token``.
Message format, from "自定义机器人发送群消息" / message types
(https://open.dingtalk.com/document/development/robot-message-type):
{"msgtype": "markdown", "markdown": {"title": …, "text": …}}; the answer is
{"errcode": 0, "errmsg": "ok"}; errcode 130101 = sending too fast (20 a minute),
310000 = keyword / signature / IP check refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any
from urllib.parse import quote_plus

from monitoring.alerts.transport import (
    Card,
    Transport,
    TransportError,
    alert_card,
    json_answer,
    post_json,
)
from monitoring.alerts.wecom import clean
from monitoring.models.alerts import Alert

RATE_LIMITED = 130101


def sign(timestamp_ms: int, secret: str) -> str:
    """URL-encoded Base64(HmacSHA256(key=secret, "timestamp\\nsecret")), as the doc's sample."""
    digest = hmac.new(
        secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256
    ).digest()
    return quote_plus(base64.b64encode(digest).decode())


def signed_url(url: str, secret: str, now_ms: int) -> str:
    """The webhook address with &timestamp=…&sign=… appended."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}timestamp={now_ms}&sign={sign(now_ms, secret)}"


def markdown(card: Card) -> str:
    colour = (
        "#2E7D32"
        if card.resolved
        else ("#D32F2F" if card.severity == "critical" else "#F57C00")
    )
    lines = [f'### <font color="{colour}">{clean(card.title)}</font>', ""]
    lines += [f"- {label}: **{clean(value)}**" for label, value in card.lines()]
    if card.summary:
        lines += ["", f"> {clean(card.summary)}"]
    if card.link:
        lines += ["", f"[{card.link}]({card.link})"]
    return "\n".join(lines)


def payload(card: Card) -> dict[str, Any]:
    """The robot's markdown message (the title shows in the chat list and notifications)."""
    return {
        "msgtype": "markdown",
        "markdown": {"title": clean(card.title), "text": markdown(card)},
    }


class DingTalkTransport(Transport):
    def send(self, alert: Alert, status: str) -> None:
        url = self.channel.url
        if self.channel.secret:
            url = signed_url(url, self.channel.secret, int(time.time() * 1000))
        answer = json_answer(post_json(url, payload(alert_card(alert, status))))
        code = answer.get("errcode")
        if code != 0:
            raise TransportError(
                f"DingTalk errcode {code}: {str(answer.get('errmsg'))[:200]}",
                permanent=code != RATE_LIMITED,
            )
