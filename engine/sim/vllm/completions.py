"""The OpenAI routes, ``/v1/chat/completions`` and ``/v1/completions``, as vLLM 0.33
answers them (reference/vllm-facts.md §2).

Both run the same exchange (check, submit, answer whole or stream ``data: {chunk}``
frames then ``data: [DONE]``); a :class:`Shape` holds what each words differently.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from engine.sim.vllm import text
from engine.sim.vllm.api import STATE, ApiError, ServerState, openai_route
from engine.sim.vllm.parse import (
    chat_prompt,
    check_model,
    check_sampling,
    int_param,
    json_body,
)
from engine.sim.vllm.runtime import Stream
from engine.sim.vllm.streams import events, send_events, submit, whole

Choice = dict[str, Any]


@dataclass(frozen=True)
class Shape:
    """What differs between the chat and the text completion answers."""

    prefix: str  # of the request id
    # the whole answer: its "object", its choice, its fields after "usage"
    answer_object: str
    choice: Callable[[str, text.Completion], Choice]
    tail: Choice
    # the stream: each chunk's "object", the choice of a first chunk sent before any
    # text (None: none), a choice given the text of one event (None: no text) and
    # the finish reason
    chunk_object: str
    opening: Choice | None
    chunk_choice: Callable[[str | None, str | None, text.Completion], Choice]


def _chat_choice(content: str, comp: text.Completion) -> Choice:
    return {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": content,
            "reasoning": None,
            "tool_calls": [],
        },
        "logprobs": None,
        "finish_reason": comp.finish_reason,
        "stop_reason": comp.stop_reason,
    }


def _chat_chunk_choice(
    piece: str | None, finish: str | None, comp: text.Completion
) -> Choice:
    return {
        "index": 0,
        "delta": {} if piece is None else {"content": piece},
        "logprobs": None,
        "finish_reason": finish,
        **({"stop_reason": comp.stop_reason} if finish else {}),
    }


def _text_choice(content: str, comp: text.Completion) -> Choice:
    return {
        "index": 0,
        "text": content,
        "logprobs": None,
        "finish_reason": comp.finish_reason,
        "stop_reason": comp.stop_reason,
        "prompt_logprobs": None,
    }


def _text_chunk_choice(
    piece: str | None, finish: str | None, comp: text.Completion
) -> Choice:
    return {
        "index": 0,
        "text": "" if piece is None else piece,
        "logprobs": None,
        "finish_reason": finish,
        "stop_reason": comp.stop_reason if finish else None,
    }


CHAT = Shape(
    prefix="chatcmpl",
    answer_object="chat.completion",
    choice=_chat_choice,
    tail={"prompt_logprobs": None, "kv_transfer_params": None},
    chunk_object="chat.completion.chunk",
    # the chat stream opens with the assistant's role and empty content
    opening={
        "index": 0,
        "delta": {"role": "assistant", "content": ""},
        "logprobs": None,
        "finish_reason": None,
    },
    chunk_choice=_chat_chunk_choice,
)
TEXT = Shape(
    prefix="cmpl",
    answer_object="text_completion",
    choice=_text_choice,
    tail={"kv_transfer_params": None},
    chunk_object="text_completion",
    opening=None,
    chunk_choice=_text_chunk_choice,
)


@openai_route
async def chat(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions."""
    state = request.app[STATE]
    body = await _checked_body(request, state)
    prompt = chat_prompt(body.get("messages"))
    mt = int_param(body, "max_completion_tokens", None)
    mt = int_param(body, "max_tokens", mt)
    return await _complete(request, state, body, prompt, mt, CHAT)


@openai_route
async def completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions."""
    state = request.app[STATE]
    body = await _checked_body(request, state)
    prompt = _completion_prompt(body.get("prompt"))
    return await _complete(
        request, state, body, prompt, int_param(body, "max_tokens", 16), TEXT
    )


async def _checked_body(request: web.Request, state: ServerState) -> dict[str, Any]:
    """The JSON body, its model and its sampling parameters checked."""
    body = await json_body(request)
    check_model(state, body)
    check_sampling(body)
    return body


def _completion_prompt(raw: Any) -> list[str]:
    """Prompt tokens of /v1/completions: a string, a list of one, or token ids."""
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    if isinstance(raw, str):
        return text.split(raw)
    if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
        return [f"<{t}>" for t in raw]  # token ids: only their count matters
    raise ApiError(
        400,
        "prompt must be a string, a list with one string, or a list of token ids.",
        "prompt",
    )


async def _complete(
    request: web.Request,
    state: ServerState,
    body: dict[str, Any],
    prompt: list[str],
    max_tokens: int | None,
    shape: Shape,
) -> web.StreamResponse:
    """Submit the request, then answer it whole or streamed, as ``body`` asks."""
    stream = submit(state, shape.prefix, prompt, body, max_tokens, "stop")
    created = int(time.time())

    def head(obj: str) -> dict[str, Any]:
        return {
            "id": stream.request_id,
            "object": obj,
            "created": created,
            "model": state.args.model_name,
        }

    if not body.get("stream"):
        content = "".join(text.pieces(stream.completion.tokens))
        answer = {
            **head(shape.answer_object),
            "choices": [shape.choice(content, stream.completion)],
            "usage": _usage(stream),
            **shape.tail,
        }
        return await whole(request, state, stream, answer)
    opts = body.get("stream_options") or {}
    include_usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
    frames = _chunks(
        request, state, stream, shape, head(shape.chunk_object), include_usage
    )
    return await send_events(request, state, stream, frames)


async def _chunks(
    request: web.Request,
    state: ServerState,
    stream: Stream,
    shape: Shape,
    head: dict[str, Any],
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """The stream's frames: the opening chunk, one chunk per event with the finish
    reason on the last (a lone finishing chunk when no event came), the usage chunk
    if asked for, then ``data: [DONE]``."""
    comp = stream.completion
    pieces = text.pieces(comp.tokens)
    if shape.opening is not None:
        yield _data({**head, "choices": [shape.opening]})
    sent = 0
    async for group in events(request, state, stream):
        last = group[-1] == stream.output_len - 1
        piece = "".join(pieces[i] for i in group)
        choice = shape.chunk_choice(piece, comp.finish_reason if last else None, comp)
        yield _data({**head, "choices": [choice]})
        sent += 1
    if sent == 0:
        choice = shape.chunk_choice(None, comp.finish_reason, comp)
        yield _data({**head, "choices": [choice]})
    if include_usage:
        yield _data({**head, "choices": [], "usage": _usage(stream)})
    yield b"data: [DONE]\n\n"


def _data(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _usage(stream: Stream) -> dict[str, Any]:
    """OpenAI's usage object of a request."""
    p, c = len(stream.prompt_ids), stream.output_len
    return {
        "prompt_tokens": p,
        "total_tokens": p + c,
        "completion_tokens": c,
        "prompt_tokens_details": None,
    }
