"""The head's HTTP API (aiohttp): health, OpenAI, Anthropic, tokenizer, metrics routes.

Shapes follow vLLM 0.33 (reference/vllm-facts.md §2): SSE ``data: {chunk}\\n\\n`` …
``data: [DONE]``
for OpenAI, ``event: <type>\\ndata: <json>\\n\\n`` for Anthropic; OpenAI errors are
``{"error": {"message", "type", "param", "code"}}``, Anthropic ones
``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from engine.sim.vllm import answers, text
from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.metrics import _newer
from engine.sim.vllm.runtime import SimEngine, Stream


@dataclass
class ServerState:
    """What the routes need to know about the process."""

    args: ServeArgs
    engine: SimEngine
    healthy: Callable[[], bool]  # all ranks joined, loaded, none dead


class ApiError(Exception):
    """An error answer: HTTP status, message, the offending param."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


_OPENAI_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    503: "ServiceUnavailableError",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    503: "overloaded_error",
}


def openai_error(err: ApiError) -> web.Response:
    body = {
        "error": {
            "message": err.message,
            "type": _OPENAI_TYPES.get(err.status, "InternalServerError"),
            "param": err.param,
            "code": err.status,
        }
    }
    return web.json_response(body, status=err.status)


def anthropic_error(err: ApiError) -> web.Response:
    body = {
        "type": "error",
        "error": {
            "type": _ANTHROPIC_TYPES.get(err.status, "api_error"),
            "message": err.message,
        },
    }
    return web.json_response(body, status=err.status)


# ---------------------------------------------------------------- request parsing


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def _check_model(state: ServerState, body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is not None and model not in (state.args.model_name, state.args.model):
        raise ApiError(404, f"The model `{model}` does not exist.", "model")


def _content_text(content: Any, field: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
        return "\n".join(parts)
    if content is None:
        return ""
    raise ApiError(400, f"{field} must be a string or a list of text blocks.", field)


def chat_prompt(messages: Any, system: str | None = None) -> list[str]:
    """Prompt tokens of a chat (Qwen chat template: <|im_start|>role … <|im_end|>)."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list.", "messages")
    toks: list[str] = []
    turns = ([{"role": "system", "content": system}] if system else []) + messages
    for i, msg in enumerate(turns):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise ApiError(400, f"messages[{i}] needs a role and content.", "messages")
        toks += [
            "<|im_start|>",
            msg["role"],
            *text.split(_content_text(msg.get("content"), "messages")),
            "<|im_end|>",
        ]
    return toks + ["<|im_start|>", "assistant"]


def _int_param(body: dict[str, Any], name: str, default: int | None) -> int | None:
    v = body.get(name, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ApiError(400, f"{name} must be a non-negative integer.", name)
    return v


def _stops(body: dict[str, Any], name: str) -> list[str]:
    v = body.get(name)
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(s, str) for s in v):
        return list(v)
    raise ApiError(400, f"{name} must be a string or a list of strings.", name)


def _check_sampling(body: dict[str, Any]) -> None:
    for name, lo, hi in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        v = body.get(name)
        if v is not None and (
            not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi
        ):
            raise ApiError(
                400, f"{name} must be between {lo} and {hi}, got {v!r}.", name
            )
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(400, "Only n=1 is supported by this server.", "n")


def _budget(
    state: ServerState, prompt_len: int, max_tokens: int | None, field: str
) -> int:
    limit = state.args.max_model_len
    if max_tokens is None:
        max_tokens = max(limit - prompt_len, 0)
    if prompt_len + max_tokens > limit:
        raise ApiError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you "
            "requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, "
            f"{max_tokens} in the "
            "completion). Please reduce the length of the messages or completion.",
            field,
        )
    return max_tokens


def _submit(
    state: ServerState,
    prefix: str,
    prompt_toks: list[str],
    body: dict[str, Any],
    max_tokens: int,
    stop: list[str],
) -> Stream:
    if not state.healthy():
        raise ApiError(
            503,
            "The engine is not ready: waiting for ranks to join or for the model to "
            "load.",
        )
    seed = text.seed_of(" ".join(prompt_toks))
    if (
        state.engine.links.garbled
    ):  # a rank with the garbled fault corrupts every answer
        completion = answers.garbled(seed, max_tokens)
    else:
        completion = answers.answer(
            text.join(prompt_toks), max_tokens
        ) or text.generate(
            seed, max_tokens, stop=stop, ignore_eos=bool(body.get("ignore_eos"))
        )
    ids = [text.token_id(t) for t in prompt_toks]
    return state.engine.submit(
        f"{prefix}-{uuid.uuid4().hex}", ids, completion, max_tokens=max_tokens
    )


def _closed(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def _tokens(request: web.Request, state: ServerState, stream: Stream) -> Any:
    """Yield token indexes as the engine emits them; abort if the client leaves."""
    while True:
        try:
            item = await asyncio.wait_for(stream.queue.get(), 0.25)
        except TimeoutError:
            if _closed(request):
                state.engine.abort(stream.request_id)
                raise ConnectionResetError("client disconnected") from None
            continue
        if item is None:
            if stream.shutdown:
                raise ConnectionResetError("engine shutting down")
            return
        yield item


async def _events(
    request: web.Request, state: ServerState, stream: Stream
) -> AsyncIterator[list[int]]:
    """The token indexes of each streamed event, as vLLM's output processor groups
    them with ``--stream-interval N``: the first token at once, then every N tokens,
    and whatever is left when the request finishes (vllm/v1/engine/output_processor.py,
    RequestState.make_request_output: "Send output request only when 1. It has
    finished, or 2. It is the first token, or 3. It has reached the stream interval
    number of tokens"). N = 1 (the default): one event per token."""
    interval, pending, sent = state.args.stream_interval, [], False
    async for i in _tokens(request, state, stream):
        pending.append(i)
        if not sent or len(pending) >= interval or i == stream.output_len - 1:
            yield pending
            pending, sent = [], True
    if pending:
        yield pending


async def _collect(request: web.Request, state: ServerState, stream: Stream) -> None:
    async for _ in _tokens(request, state, stream):
        pass


def _usage(stream: Stream) -> dict[str, Any]:
    p, c = len(stream.prompt_ids), stream.output_len
    return {
        "prompt_tokens": p,
        "total_tokens": p + c,
        "completion_tokens": c,
        "prompt_tokens_details": None,
    }


async def _sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    return resp


# ---------------------------------------------------------------- routes


def authenticate(keys: tuple[str, ...]) -> Callable[..., Any]:
    """vLLM's AuthenticationMiddleware, as the target versions behave.

    Only paths under ``/v1`` need ``Authorization: Bearer <key>``; ``/health``,
    ``/metrics``, ``/version``, ``/load``, ``/ping``, ``/tokenize`` stay open, and
    OPTIONS passes. A miss is 401 ``{"error": "Unauthorized"}``. Keys are compared
    as SHA-256 digests with ``secrets.compare_digest`` (constant time). Source:
    vllm/entrypoints/openai/api_server.py ``AuthenticationMiddleware`` (``if
    url_path.startswith("/v1") and not self.verify_token(headers)``), vLLM 0.2x.
    """
    digests = [hashlib.sha256(k.encode()).digest() for k in keys]

    def verified(header: str | None) -> bool:
        scheme, _, param = (header or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        given = hashlib.sha256(param.encode()).digest()
        match = False
        for digest in digests:
            match |= secrets.compare_digest(given, digest)
        return match

    @web.middleware
    async def middleware(
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if (
            request.method != "OPTIONS"
            and request.path.startswith("/v1")
            and not verified(request.headers.get("Authorization"))
        ):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    return middleware


def build_app(state: ServerState) -> web.Application:
    """The aiohttp application of the head's API server."""
    middlewares = [authenticate(state.args.api_keys)] if state.args.api_keys else []
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=middlewares)
    r = app.router

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200 if state.healthy() else 503)

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": state.args.version})

    async def load(request: web.Request) -> web.Response:
        return web.json_response({"server_load": state.engine.in_flight})

    async def metrics(request: web.Request) -> web.Response:
        resp = web.Response(body=state.engine.metrics.exposition())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def models(request: web.Request) -> web.Response:
        name = state.args.model_name
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": state.args.model,
            "parent": None,
            "max_model_len": state.args.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex}",
                    "object": "model_permission",
                    "created": int(time.time()),
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return web.json_response({"object": "list", "data": [card]})

    def openai_route(
        fn: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            try:
                return await fn(request)
            except ApiError as err:
                return openai_error(err)

        return wrapped

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        _check_model(state, body)
        _check_sampling(body)
        prompt = chat_prompt(body.get("messages"))
        mt = _int_param(body, "max_completion_tokens", None)
        mt = _int_param(body, "max_tokens", mt)
        max_tokens = _budget(state, len(prompt), mt, "max_tokens")
        stream = _submit(
            state, "chatcmpl", prompt, body, max_tokens, _stops(body, "stop")
        )
        created, model, sid = int(time.time()), state.args.model_name, stream.request_id
        pieces = text.pieces(stream.completion.tokens)
        if not body.get("stream"):
            try:
                await _collect(request, state, stream)
            except ConnectionResetError:
                return web.Response(status=499)
            return web.json_response(
                {
                    "id": sid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": "".join(pieces),
                                "reasoning": None,
                                "tool_calls": [],
                            },
                            "logprobs": None,
                            "finish_reason": stream.completion.finish_reason,
                            "stop_reason": stream.completion.stop_reason,
                        }
                    ],
                    "usage": _usage(stream),
                    "prompt_logprobs": None,
                    "kv_transfer_params": None,
                }
            )
        opts = body.get("stream_options") or {}
        include_usage = (
            bool(opts.get("include_usage")) if isinstance(opts, dict) else False
        )

        def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
            c = {
                "id": sid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": finish,
                        **(
                            {"stop_reason": stream.completion.stop_reason}
                            if finish
                            else {}
                        ),
                    }
                ],
            }
            return f"data: {json.dumps(c)}\n\n".encode()

        resp = await _sse(request)
        try:
            await resp.write(chunk({"role": "assistant", "content": ""}, None))
            sent = 0
            async for group in _events(request, state, stream):
                last = group[-1] == stream.output_len - 1
                await resp.write(
                    chunk(
                        {"content": "".join(pieces[i] for i in group)},
                        stream.completion.finish_reason if last else None,
                    )
                )
                sent += 1
            if sent == 0:
                await resp.write(chunk({}, stream.completion.finish_reason))
            if include_usage:
                u = {
                    "id": sid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": _usage(stream),
                }
                await resp.write(f"data: {json.dumps(u)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, ConnectionError):
            state.engine.abort(stream.request_id)
            return resp
        return resp

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        _check_model(state, body)
        _check_sampling(body)
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1:
            raw = raw[0]
        if isinstance(raw, str):
            prompt = text.split(raw)
        elif isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            prompt = [f"<{t}>" for t in raw]  # token ids: only their count matters
        else:
            raise ApiError(
                400,
                "prompt must be a string, a list with one string, or a list of token "
                "ids.",
                "prompt",
            )
        max_tokens = _budget(
            state, len(prompt), _int_param(body, "max_tokens", 16), "max_tokens"
        )
        stream = _submit(state, "cmpl", prompt, body, max_tokens, _stops(body, "stop"))
        created, model, sid = int(time.time()), state.args.model_name, stream.request_id
        pieces = text.pieces(stream.completion.tokens)
        if not body.get("stream"):
            try:
                await _collect(request, state, stream)
            except ConnectionResetError:
                return web.Response(status=499)
            return web.json_response(
                {
                    "id": sid,
                    "object": "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "text": "".join(pieces),
                            "logprobs": None,
                            "finish_reason": stream.completion.finish_reason,
                            "stop_reason": stream.completion.stop_reason,
                            "prompt_logprobs": None,
                        }
                    ],
                    "usage": _usage(stream),
                    "kv_transfer_params": None,
                }
            )
        opts = body.get("stream_options") or {}
        include_usage = (
            bool(opts.get("include_usage")) if isinstance(opts, dict) else False
        )

        def chunk(piece: str, finish: str | None) -> bytes:
            c = {
                "id": sid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": piece,
                        "logprobs": None,
                        "finish_reason": finish,
                        "stop_reason": stream.completion.stop_reason
                        if finish
                        else None,
                    }
                ],
            }
            return f"data: {json.dumps(c)}\n\n".encode()

        resp = await _sse(request)
        try:
            sent = 0
            async for group in _events(request, state, stream):
                last = group[-1] == stream.output_len - 1
                await resp.write(
                    chunk(
                        "".join(pieces[i] for i in group),
                        stream.completion.finish_reason if last else None,
                    )
                )
                sent += 1
            if sent == 0:
                await resp.write(chunk("", stream.completion.finish_reason))
            if include_usage:
                u = {
                    "id": sid,
                    "object": "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": _usage(stream),
                }
                await resp.write(f"data: {json.dumps(u)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, ConnectionError):
            state.engine.abort(stream.request_id)
        return resp

    async def tokenize(request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        _check_model(state, body)
        if "messages" in body:
            toks = chat_prompt(body["messages"])
        elif isinstance(body.get("prompt"), str):
            toks = text.split(body["prompt"])
        else:
            raise ApiError(400, "tokenize needs a prompt string or messages.", "prompt")
        ids = [text.token_id(t) for t in toks]
        out: dict[str, Any] = {
            "count": len(ids),
            "max_model_len": state.args.max_model_len,
            "tokens": ids,
            "token_strs": toks if body.get("return_token_strs") else None,
        }
        return web.json_response(out)

    async def detokenize(request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        _check_model(state, body)
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            raise ApiError(400, "tokens must be a list of token ids.", "tokens")
        try:
            return web.json_response({"prompt": text.decode(ids)})
        except ValueError as exc:
            raise ApiError(400, str(exc), "tokens") from None

    # Late: engine.sim.vllm.messages imports this module (ApiError).
    from engine.sim.vllm.messages import (
        messages_routes,
    )  # the Anthropic routes share the helpers above

    r.add_get("/health", health)
    r.add_get("/ping", health)
    r.add_post("/ping", health)
    r.add_get("/version", version)
    r.add_get("/load", load)
    r.add_get("/metrics", metrics)
    r.add_get("/v1/models", models)
    r.add_post("/v1/chat/completions", openai_route(chat))
    r.add_post("/v1/completions", openai_route(completions))
    r.add_post("/tokenize", openai_route(tokenize))
    r.add_post("/detokenize", openai_route(detokenize))
    messages, count_tokens = messages_routes(state)
    r.add_post("/v1/messages", messages)
    if _newer(
        state.args.version, "0.33.0"
    ):  # count_tokens is in the 0.33 router (reference §2)
        r.add_post("/v1/messages/count_tokens", count_tokens)
    return app
