"""Feishu / Lark (飞书) custom bot: an interactive card, signed when the bot verifies signatures.

From Feishu's "自定义机器人使用指南"
(https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot; Lark:
https://open.larksuite.com/document/client-docs/bot-v3/add-custom-bot): POST the webhook
(…/open-apis/bot/v2/hook/<token>) with {"msg_type": "interactive", "card": …}, at most
20 KB; with signature verification the body also carries "timestamp" (seconds, within
one hour) and "sign" = Base64(HmacSHA256 keyed with timestamp + "\\n" + secret over an
empty message). The answer is {"code": 0, "msg": "success"}; 19021 = bad signature or
timestamp, 9499 = bad request, 11232 = frequency limited.
Card layout (header with a colour template, markdown element, button with a URL) from
the message-card docs (https://open.feishu.cn/document/common-capabilities/message-card/message-cards-content/card-header).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

from django.utils.translation import gettext as _

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

RATE_LIMITED = 11232


def sign(timestamp_s: int, secret: str) -> str:
    """Base64(HmacSHA256(key="timestamp\\nsecret", message=b""))."""
    key = f"{timestamp_s}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def card_json(card: Card) -> dict[str, Any]:
    template = (
        "green"
        if card.resolved
        else ("red" if card.severity == "critical" else "orange")
    )
    body = "\n".join(f"**{label}**: {clean(value)}" for label, value in card.lines())
    if card.summary:
        body += f"\n{clean(card.summary)}"
    elements: list[dict[str, Any]] = [{"tag": "markdown", "content": body}]
    if card.link:
        elements.append(
            {
                "tag": "action",
                "actions": [
                    {
                        "tag": "button",
                        "text": {
                            "tag": "plain_text",
                            "content": _("Open in the console"),
                        },
                        "type": "primary",
                        "url": card.link,
                    }
                ],
            }
        )
    return {
        "config": {"wide_screen_mode": True},
        "header": {
            "template": template,
            "title": {"tag": "plain_text", "content": clean(card.title)},
        },
        "elements": elements,
    }


def payload(
    card: Card, *, secret: str = "", now_s: int | None = None
) -> dict[str, Any]:
    """The bot's interactive message, with timestamp + sign when ``secret`` is set."""
    body: dict[str, Any] = {"msg_type": "interactive", "card": card_json(card)}
    if secret:
        ts = int(time.time()) if now_s is None else now_s
        body = {"timestamp": str(ts), "sign": sign(ts, secret), **body}
    return body


class FeishuTransport(Transport):
    def send(self, alert: Alert, status: str) -> None:
        body = payload(alert_card(alert, status), secret=self.channel.secret)
        answer = json_answer(post_json(self.channel.url, body))
        code = answer.get("code", answer.get("StatusCode"))
        if code != 0:
            raise TransportError(
                f"Feishu code {code}: {str(answer.get('msg'))[:200]}",
                permanent=code != RATE_LIMITED,
            )
