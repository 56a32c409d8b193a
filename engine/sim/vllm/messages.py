"""The Anthropic Messages API (``/v1/messages``), as vLLM ≥ 0.11.1 serves it.

Streaming sends ``event: <type>\\ndata: <json>\\n\\n`` frames in the order
message_start,
content_block_start, ping, content_block_delta (text_delta)…, content_block_stop,
message_delta (stop_reason, usage.output_tokens), message_stop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from engine.sim.vllm import text
from engine.sim.vllm.api import STATE, ApiError, ServerState, anthropic_route
from engine.sim.vllm.parse import (
    chat_prompt,
    check_model,
    content_text,
    int_param,
    json_body,
)
from engine.sim.vllm.runtime import Stream
from engine.sim.vllm.streams import send_events, submit, tokens, whole

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _prompt(body: dict[str, Any]) -> list[str]:
    system = body.get("system")
    return chat_prompt(
        body.get("messages"),
        content_text(system, "system") if system is not None else None,
    )


@anthropic_route
async def messages(request: web.Request) -> web.StreamResponse:
    """POST /v1/messages: the whole message, or its events streamed."""
    state = request.app[STATE]
    body = await json_body(request)
    check_model(state, body)
    if int_param(body, "max_tokens", None) is None:
        raise ApiError(400, "max_tokens: Field required", "max_tokens")
    prompt = _prompt(body)
    max_tokens = int_param(body, "max_tokens", None)
    stream = submit(state, "msg", prompt, body, max_tokens, "stop_sequences")
    comp = stream.completion
    stop_reason = (
        "stop_sequence" if comp.stop_reason else _STOP_REASONS[comp.finish_reason]
    )
    model = body.get("model") or state.args.model_name
    if not body.get("stream"):
        answer = {
            "id": stream.request_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "".join(text.pieces(comp.tokens))}],
            "stop_reason": stop_reason,
            "stop_sequence": comp.stop_reason,
            "usage": {
                "input_tokens": len(stream.prompt_ids),
                "output_tokens": stream.output_len,
            },
        }
        return await whole(request, state, stream, answer)
    frames = _events(request, state, stream, model, stop_reason)
    return await send_events(request, state, stream, frames)


async def _events(
    request: web.Request,
    state: ServerState,
    stream: Stream,
    model: str,
    stop_reason: str,
) -> AsyncIterator[bytes]:
    """The message's event frames, one content_block_delta per token."""
    comp = stream.completion
    pieces = text.pieces(comp.tokens)
    yield _frame(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": stream.request_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": len(stream.prompt_ids), "output_tokens": 0},
            },
        },
    )
    yield _frame(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
    )
    yield _frame("ping", {"type": "ping"})
    async for i in tokens(request, state, stream):
        yield _frame(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": pieces[i]},
            },
        )
    yield _frame("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _frame(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": comp.stop_reason},
            "usage": {"output_tokens": stream.output_len},
        },
    )
    yield _frame("message_stop", {"type": "message_stop"})


@anthropic_route
async def count_tokens(request: web.Request) -> web.StreamResponse:
    """POST /v1/messages/count_tokens: the prompt's token count."""
    state = request.app[STATE]
    body = await json_body(request)
    check_model(state, body)
    return web.json_response({"input_tokens": len(_prompt(body))})
