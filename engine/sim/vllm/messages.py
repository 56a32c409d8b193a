"""The Anthropic Messages API (``/v1/messages``), as vLLM ≥ 0.11.1 serves it.

Streaming sends ``event: <type>\\ndata: <json>\\n\\n`` frames in the order
message_start,
content_block_start, ping, content_block_delta (text_delta)…, content_block_stop,
message_delta (stop_reason, usage.output_tokens), message_stop.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from engine.sim.vllm import text
from engine.sim.vllm.server import (
    ApiError,
    ServerState,
    _budget,
    _check_model,
    _collect,
    _content_text,
    _int_param,
    _json_body,
    _sse,
    _stops,
    _submit,
    _tokens,
    anthropic_error,
    chat_prompt,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _prompt(body: dict[str, Any]) -> list[str]:
    system = body.get("system")
    return chat_prompt(
        body.get("messages"),
        _content_text(system, "system") if system is not None else None,
    )


def messages_routes(state: ServerState) -> tuple[Handler, Handler]:
    """The ``/v1/messages`` and ``/v1/messages/count_tokens`` handlers."""

    async def messages(request: web.Request) -> web.StreamResponse:
        try:
            return await _messages(request)
        except ApiError as err:
            return anthropic_error(err)

    async def _messages(request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        _check_model(state, body)
        if _int_param(body, "max_tokens", None) is None:
            raise ApiError(400, "max_tokens: Field required", "max_tokens")
        prompt = _prompt(body)
        max_tokens = _budget(
            state, len(prompt), _int_param(body, "max_tokens", None), "max_tokens"
        )
        stops = _stops(body, "stop_sequences")
        stream = _submit(state, "msg", prompt, body, max_tokens, stops)
        comp = stream.completion
        stop_reason = (
            "stop_sequence" if comp.stop_reason else _STOP_REASONS[comp.finish_reason]
        )
        model, mid = body.get("model") or state.args.model_name, stream.request_id
        pieces = text.pieces(comp.tokens)
        if not body.get("stream"):
            try:
                await _collect(request, state, stream)
            except ConnectionResetError:
                return web.Response(status=499)
            return web.json_response(
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": "".join(pieces)}],
                    "stop_reason": stop_reason,
                    "stop_sequence": comp.stop_reason,
                    "usage": {
                        "input_tokens": len(stream.prompt_ids),
                        "output_tokens": stream.output_len,
                    },
                }
            )
        resp = await _sse(request)
        try:
            await resp.write(
                _frame(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": mid,
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": {
                                "input_tokens": len(stream.prompt_ids),
                                "output_tokens": 0,
                            },
                        },
                    },
                )
            )
            await resp.write(
                _frame(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            await resp.write(_frame("ping", {"type": "ping"}))
            async for i in _tokens(request, state, stream):
                await resp.write(
                    _frame(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": pieces[i]},
                        },
                    )
                )
            await resp.write(
                _frame("content_block_stop", {"type": "content_block_stop", "index": 0})
            )
            await resp.write(
                _frame(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {
                            "stop_reason": stop_reason,
                            "stop_sequence": comp.stop_reason,
                        },
                        "usage": {"output_tokens": stream.output_len},
                    },
                )
            )
            await resp.write(_frame("message_stop", {"type": "message_stop"}))
        except (ConnectionResetError, ConnectionError):
            state.engine.abort(stream.request_id)
        return resp

    async def count_tokens(request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request)
            _check_model(state, body)
            return web.json_response({"input_tokens": len(_prompt(body))})
        except ApiError as err:
            return anthropic_error(err)

    return messages, count_tokens
