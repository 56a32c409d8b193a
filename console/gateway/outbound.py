"""What the gateway sends an engine for one request: the path and body (the client's
bytes as they came whenever they will do), the headers (request id, the engine's own
API key) and the POST itself, with an early admission settled before its answer is
taken (admission.Early). console.gateway.views routes and answers; this module only
sends."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import orjson

from console.gateway import routing, translate
from console.gateway.admission import Early
from console.gateway.errors import OPENAI, GatewayError
from console.gateway.http import Request
from console.gateway.upstream import (
    Unreachable,
    UpstreamError,
    UpstreamResponse,
    post,
)
from console.middleware import REQUEST_ID_RE

_ASK_USAGE = b'"stream_options":{"include_usage":true},'


def upstream_request(
    req: Request, protocol: str, path: str, body: dict[str, Any], translated: bool
) -> tuple[str, bytes]:
    """The engine path and body for a client request: the client's bytes as they
    came whenever they will do."""
    if translated:
        return "/v1/chat/completions", encode(translate.messages_to_chat(body))
    if protocol == OPENAI and body.get("stream"):
        # Ask for the usage chunk so the key's tokens can be counted; the client
        # still sees its own choice.
        opts: dict[str, Any] = body.get("stream_options") or {}
        if opts.get("include_usage") is True:
            return path, req.body
        raw = req.body.lstrip()
        if "stream_options" not in body and raw[:1] == b"{":
            # one member added in front of the client's own (UTF-8) object: a long
            # prompt is not decoded and encoded again
            return path, b"{" + _ASK_USAGE + raw[1:]
        return path, encode({**body, "stream_options": {**opts, "include_usage": True}})
    return path, req.body


# X-Request-ID for a request without a usable one of its own: this process's random
# prefix and a counter (unique like a uuid4, without its os.urandom call per request)
_ID_PREFIX = uuid.uuid4().hex[:20]
_ids = itertools.count(1)


def request_id(given: str) -> str:
    """The client's X-Request-ID when it is a short plain token (it reaches the
    engine's logs), else a fresh one."""
    return given if REQUEST_ID_RE.match(given) else f"{_ID_PREFIX}{next(_ids):012x}"


def encode(body: dict[str, Any]) -> bytes:
    return orjson.dumps(body)


async def sent(
    req: Request,
    upstream: routing.Upstream,
    path: str,
    data: bytes,
    early: Early | None,
) -> UpstreamResponse:
    """``_send``; with an early admission, that admission settled before what came
    back (an answer, or the engine's failure) is taken as this request's."""
    if early is None:
        return await send(req, upstream, path, data)
    try:
        resp = await send(req, upstream, path, data)
    except (Unreachable, GatewayError):
        await early.settle()
        raise
    try:
        await early.settle()
    except BaseException:
        # the engine sees the connection go and aborts the request: vLLM's API
        # server races each handler against an ASGI http.disconnect listener and
        # cancels it (vllm/entrypoints/utils.py, with_cancellation and
        # listen_for_disconnect); a stream ends with its generator
        resp.close()
        raise
    return resp


async def send(
    req: Request, upstream: routing.Upstream, path: str, data: bytes
) -> UpstreamResponse:
    """POST ``data`` (the client's body as it came, or the gateway's rewrite)."""
    headers = {
        "Content-Type": "application/json",
        "X-Request-ID": request_id(req.headers.get("x-request-id", "")),
    }
    if req.headers.get("anthropic-version"):
        headers["anthropic-version"] = req.headers["anthropic-version"]
    if upstream.api_key:
        # vLLM's --api-key guards /v1/* with this bearer token (vllm/entrypoints/
        # openai/api_server.py, AuthenticationMiddleware)
        headers["Authorization"] = f"Bearer {upstream.api_key}"
    try:
        return await post(upstream.base_url, path, data, headers)
    except Unreachable:
        raise
    except (TimeoutError, UpstreamError) as exc:
        raise GatewayError(
            502,
            f"Cluster {upstream.cluster_name} did not answer "
            f"({type(exc).__name__}); retry shortly.",
            retry_after=5,
        ) from None
