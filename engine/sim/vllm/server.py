"""The head's HTTP API (aiohttp): the route table, authentication, and the small
routes (health, version, load, metrics, models, tokenizer).

Shapes follow vLLM 0.33 (reference/vllm-facts.md §2): SSE ``data: {chunk}\\n\\n`` …
``data: [DONE]``
for OpenAI, ``event: <type>\\ndata: <json>\\n\\n`` for Anthropic; OpenAI errors are
``{"error": {"message", "type", "param", "code"}}``, Anthropic ones
``{"type": "error", "error": {"type", "message"}}``. The OpenAI routes are in
completions.py, the Anthropic ones in messages.py, the shared steps in api.py,
parse.py and streams.py.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from engine.sim.vllm import text
from engine.sim.vllm.api import STATE, ApiError, ServerState, openai_route
from engine.sim.vllm.completions import chat, completions
from engine.sim.vllm.messages import count_tokens, messages
from engine.sim.vllm.metrics import _newer
from engine.sim.vllm.parse import chat_prompt, check_model, json_body


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


async def health(request: web.Request) -> web.Response:
    """200 once the head serves, else 503 (also /ping)."""
    return web.Response(status=200 if request.app[STATE].healthy() else 503)


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": request.app[STATE].args.version})


async def load(request: web.Request) -> web.Response:
    return web.json_response({"server_load": request.app[STATE].engine.in_flight})


async def metrics(request: web.Request) -> web.Response:
    resp = web.Response(body=request.app[STATE].engine.metrics.exposition())
    resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return resp


async def models(request: web.Request) -> web.Response:
    """The one served model's card."""
    args = request.app[STATE].args
    name = args.model_name
    card = {
        "id": name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": args.model,
        "parent": None,
        "max_model_len": args.max_model_len,
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


@openai_route
async def tokenize(request: web.Request) -> web.StreamResponse:
    """The token ids of a prompt string or of chat messages."""
    state = request.app[STATE]
    body = await json_body(request)
    check_model(state, body)
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


@openai_route
async def detokenize(request: web.Request) -> web.StreamResponse:
    """The text of a list of token ids."""
    body = await json_body(request)
    check_model(request.app[STATE], body)
    ids = body.get("tokens")
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise ApiError(400, "tokens must be a list of token ids.", "tokens")
    try:
        return web.json_response({"prompt": text.decode(ids)})
    except ValueError as exc:
        raise ApiError(400, str(exc), "tokens") from None


def build_app(state: ServerState) -> web.Application:
    """The aiohttp application of the head's API server."""
    middlewares = [authenticate(state.args.api_keys)] if state.args.api_keys else []
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=middlewares)
    app[STATE] = state
    r = app.router
    r.add_get("/health", health)
    r.add_get("/ping", health)
    r.add_post("/ping", health)
    r.add_get("/version", version)
    r.add_get("/load", load)
    r.add_get("/metrics", metrics)
    r.add_get("/v1/models", models)
    r.add_post("/v1/chat/completions", chat)
    r.add_post("/v1/completions", completions)
    r.add_post("/tokenize", tokenize)
    r.add_post("/detokenize", detokenize)
    r.add_post("/v1/messages", messages)
    if _newer(
        state.args.version, "0.33.0"
    ):  # count_tokens is in the 0.33 router (reference §2)
        r.add_post("/v1/messages/count_tokens", count_tokens)
    return app
