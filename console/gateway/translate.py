"""Anthropic Messages <-> OpenAI chat completions, for engines older than vLLM 0.11.1
(no /v1/messages).

Streaming answers keep Anthropic's event order: message_start, content_block_start,
content_block_delta..., content_block_stop, message_delta (stop_reason, usage),
message_stop.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from console.gateway.errors import GatewayError
from console.gateway.sse import sse_data, sse_frame

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "abort": "end_turn"}


def _text(content: Any, field: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, block in enumerate(content):
            if (
                not isinstance(block, dict)
                or block.get("type") != "text"
                or not isinstance(block.get("text"), str)
            ):
                raise GatewayError(
                    400,
                    f"{field}[{i}] must be a text block "
                    '({"type": "text", "text": ...}); '
                    "this engine's vLLM has no native /v1/messages, "
                    "so only text is translated.",
                    param=field,
                )
            parts.append(block["text"])
        return "\n".join(parts)
    raise GatewayError(
        400, f"{field} must be a string or a list of text blocks.", param=field
    )


def messages_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages request as a chat completions request. Raises
    GatewayError(400) naming the field."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayError(
            400,
            "messages must be a non-empty list of {role, content}.",
            param="messages",
        )
    max_tokens = body.get("max_tokens")
    if (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or max_tokens < 1
    ):
        raise GatewayError(
            400, "max_tokens is required: a positive integer.", param="max_tokens"
        )
    chat: list[dict[str, str]] = []
    if body.get("system") is not None:
        chat.append({"role": "system", "content": _text(body["system"], "system")})
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise GatewayError(
                400,
                f"messages[{i}].role must be 'user' or 'assistant'.",
                param="messages",
            )
        chat.append(
            {
                "role": msg["role"],
                "content": _text(msg.get("content"), f"messages[{i}].content"),
            }
        )
    out: dict[str, Any] = {
        "model": body["model"],
        "messages": chat,
        "max_tokens": max_tokens,
    }
    for src, dst in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("stop_sequences", "stop"),
    ):
        if body.get(src) is not None:
            out[dst] = body[src]
    if body.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


def _stop(finish: str | None, stop_reason: Any) -> tuple[str, str | None]:
    if isinstance(stop_reason, str):
        return "stop_sequence", stop_reason
    return _STOP_REASONS.get(finish or "stop", "end_turn"), None


def chat_to_message(chat: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat completion answer as an Anthropic message."""
    choice = (chat.get("choices") or [{}])[0]
    stop_reason, stop_sequence = _stop(
        choice.get("finish_reason"), choice.get("stop_reason")
    )
    usage = chat.get("usage") or {}
    return {
        "id": f"msg_{chat.get('id') or uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {"type": "text", "text": (choice.get("message") or {}).get("content") or ""}
        ],
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        },
    }


def openai_error_to_anthropic(body: Any) -> str:
    """The message of an engine's OpenAI-shaped error."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return str(body)[:500]


async def chat_stream_to_messages(
    events: AsyncIterator[bytes], model: str, usage: dict[str, int]
) -> AsyncIterator[bytes]:
    """Chat completion SSE events in, Anthropic SSE frames out (one frame per delta, as
    each arrives).

    ``usage`` is filled with prompt/completion tokens as the engine reports them.
    """
    started = False
    finish: str | None = None
    stop_reason: Any = None
    mid = f"msg_{uuid.uuid4().hex}"
    async for event in events:
        data = sse_data(event)
        if data == "[DONE]":
            break
        if not isinstance(data, dict):
            continue
        if not started:
            started = True
            for frame in _start_frames(mid, model):
                yield frame
        if data.get("usage"):
            usage["prompt_tokens"] = int(data["usage"].get("prompt_tokens") or 0)
            usage["completion_tokens"] = int(
                data["usage"].get("completion_tokens") or 0
            )
        for choice in data.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                yield _text_delta_frame(piece)
            if choice.get("finish_reason"):
                finish, stop_reason = choice["finish_reason"], choice.get("stop_reason")
    if not started:
        for frame in _start_frames(mid, model):
            yield frame
    for frame in _end_frames(finish, stop_reason, usage):
        yield frame


def _start_frames(mid: str, model: str) -> list[bytes]:
    """message_start (an empty assistant message) and the start of its one text block."""
    message: dict[str, Any] = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    return [
        sse_frame("message_start", {"type": "message_start", "message": message}),
        sse_frame(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]


def _text_delta_frame(piece: str) -> bytes:
    return sse_frame(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": piece},
        },
    )


def _end_frames(
    finish: str | None, stop_reason: Any, usage: dict[str, int]
) -> list[bytes]:
    """The text block's end, the message's stop reason and usage, message_stop."""
    reason, sequence = _stop(finish, stop_reason)
    return [
        sse_frame("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse_frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": sequence},
                "usage": {
                    "input_tokens": usage.get("prompt_tokens", 0),
                    "output_tokens": usage.get("completion_tokens", 0),
                },
            },
        ),
        sse_frame("message_stop", {"type": "message_stop"}),
    ]
