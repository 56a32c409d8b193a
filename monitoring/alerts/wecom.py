"""WeCom (企业微信) group robot: a markdown message to the robot's webhook.

Format and limits from WeCom's "群机器人配置说明"
(https://developer.work.weixin.qq.com/document/path/91770): POST the webhook address
(…/cgi-bin/webhook/send?key=…) with {"msgtype": "markdown", "markdown": {"content": …}};
content at most 4096 bytes UTF-8; <font color="info|comment|warning"> are the only
colours; the answer is {"errcode": 0, "errmsg": "ok"}, errcode 45009 = rate limited
(20 messages a minute per robot).
"""

from __future__ import annotations

from typing import Any

from monitoring.alerts.transport import (
    Card,
    Transport,
    TransportError,
    alert_card,
    json_answer,
    post_json,
)
from monitoring.models.alerts import Alert

MAX_CONTENT_BYTES = 4096
RATE_LIMITED = 45009


def clean(text: str) -> str:
    """One line of user-visible text without control characters."""
    return "".join(ch if ch >= " " else " " for ch in text)


def truncate_bytes(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` UTF-8 bytes without splitting a character."""
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def markdown(card: Card) -> str:
    colour = (
        "info"
        if card.resolved
        else ("warning" if card.severity == "critical" else "comment")
    )
    lines = [f'## <font color="{colour}">{clean(card.title)}</font>']
    lines += [f"> {label}: **{clean(value)}**" for label, value in card.lines()]
    if card.summary:
        lines.append(clean(card.summary))
    if card.link:
        lines.append(f"[{card.link}]({card.link})")
    return "\n".join(lines)


def payload(card: Card) -> dict[str, Any]:
    """The robot's markdown message for one card."""
    return {
        "msgtype": "markdown",
        "markdown": {"content": truncate_bytes(markdown(card), MAX_CONTENT_BYTES)},
    }


class WeComTransport(Transport):
    def send(self, alert: Alert, status: str) -> None:
        answer = json_answer(
            post_json(self.channel.url, payload(alert_card(alert, status)))
        )
        code = answer.get("errcode")
        if code != 0:
            raise TransportError(
                f"WeCom errcode {code}: {str(answer.get('errmsg'))[:200]}",
                permanent=code != RATE_LIMITED,
            )
