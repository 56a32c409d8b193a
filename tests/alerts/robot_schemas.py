"""The robots' documented request formats as JSON Schema, and their signature checks written
from the vendors' pages (independently of the code under test).

- WeCom: https://developer.work.weixin.qq.com/document/path/91770 (markdown: content ≤ 4096 bytes)
- DingTalk: https://open.dingtalk.com/document/development/robot-message-type (markdown: title, text)
  and https://open.dingtalk.com/document/robots/customize-robot-security-settings (加签)
- Feishu: https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot (interactive card,
  timestamp + sign in the body, ≤ 20 KB) and the card header's colour templates
  (https://open.feishu.cn/document/common-capabilities/message-card/message-cards-content/card-header)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

TEXT = {"type": "string", "minLength": 1}

WECOM_MARKDOWN: dict[str, Any] = {
    "type": "object",
    "required": ["msgtype", "markdown"],
    "additionalProperties": False,
    "properties": {
        "msgtype": {"const": "markdown"},
        "markdown": {
            "type": "object",
            "required": ["content"],
            "additionalProperties": False,
            "properties": {"content": TEXT},
        },
    },
}

DINGTALK_MARKDOWN: dict[str, Any] = {
    "type": "object",
    "required": ["msgtype", "markdown"],
    "additionalProperties": False,
    "properties": {
        "msgtype": {"const": "markdown"},
        "markdown": {
            "type": "object",
            "required": ["title", "text"],
            "additionalProperties": False,
            "properties": {"title": TEXT, "text": TEXT},
        },
        "at": {"type": "object"},
    },
}

FEISHU_TEMPLATES = [
    "blue", "wathet", "turquoise", "green", "yellow", "orange",
    "red", "carmine", "violet", "purple", "indigo", "grey",
]  # fmt: skip
PLAIN_TEXT = {
    "type": "object",
    "required": ["tag", "content"],
    "properties": {"tag": {"enum": ["plain_text", "lark_md"]}, "content": TEXT},
}
FEISHU_INTERACTIVE: dict[str, Any] = {
    "type": "object",
    "required": ["msg_type", "card"],
    "additionalProperties": False,
    "dependentRequired": {"timestamp": ["sign"], "sign": ["timestamp"]},
    "properties": {
        "msg_type": {"const": "interactive"},
        "timestamp": {"type": "string", "pattern": r"^\d{10}$"},  # seconds
        "sign": TEXT,
        "card": {
            "type": "object",
            "required": ["header", "elements"],
            "properties": {
                "config": {"type": "object"},
                "header": {
                    "type": "object",
                    "required": ["title"],
                    "properties": {
                        "title": PLAIN_TEXT,
                        "template": {"enum": FEISHU_TEMPLATES},
                    },
                },
                "elements": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["tag"],
                        "properties": {
                            "tag": {
                                "enum": [
                                    "markdown",
                                    "div",
                                    "hr",
                                    "action",
                                    "note",
                                    "img",
                                ]
                            },
                            "actions": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["tag", "text"],
                                    "properties": {
                                        "tag": {"const": "button"},
                                        "text": PLAIN_TEXT,
                                        "url": {
                                            "type": "string",
                                            "pattern": "^https?://",
                                        },
                                        "type": {
                                            "enum": ["default", "primary", "danger"]
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def dingtalk_signature_ok(query: dict[str, str], secret: str) -> bool:
    """DingTalk's check: timestamp (ms) within an hour, sign == Base64(HmacSHA256(secret,
    timestamp + "\\n" + secret)) once URL-decoded (``query`` is already decoded)."""
    ts = query.get("timestamp", "")
    if not ts.isdigit() or abs(time.time() * 1000 - int(ts)) > 3600 * 1000:
        return False
    mac = hmac.new(secret.encode("utf-8"), f"{ts}\n{secret}".encode(), hashlib.sha256)
    return hmac.compare_digest(
        base64.b64encode(mac.digest()).decode(), query.get("sign", "")
    )


def feishu_signature_ok(body: dict[str, Any], secret: str) -> bool:
    """Feishu's check: timestamp (s) within an hour, sign == Base64(HmacSHA256 keyed with
    timestamp + "\\n" + secret, over an empty message)."""
    ts = str(body.get("timestamp", ""))
    if not ts.isdigit() or abs(time.time() - int(ts)) > 3600:
        return False
    mac = hmac.new(f"{ts}\n{secret}".encode(), b"", hashlib.sha256)
    return hmac.compare_digest(
        base64.b64encode(mac.digest()).decode(), str(body.get("sign"))
    )
