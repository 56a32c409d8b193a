"""``/v1/...``: OpenAI and Anthropic endpoints in front of the clusters (API-key auth,
no session), served by the gateway's own ASGI app (console.gateway.app).

A request costs, before it is sent on: a sha256 of its key, a lookup of key and
route in the process's snapshot, one Redis round trip (cache version + rate limit;
for a key well under its limits, on the wire while the request goes on, and awaited
before the answer does: admission.Early), and a pooled connection to the engine. After the answer: one Redis round trip
(tokens against the limit + usage counters).
"""

from __future__ import annotations

import re
import time
from typing import Any

import orjson

from console.gateway import outbound, routing, translate
from console.gateway.admission import (
    UNAUTHORIZED,
    Early,
    Refused,
    Restart,
    admit_or_503,
    authorized,
    snapshot_or_503,
)
from console.gateway.errors import ANTHROPIC, OPENAI, GatewayError, error_response
from console.gateway.http import Request, Response, StreamResponse, json_response
from console.gateway.ratelimit import Admission
from console.gateway.relay import (
    Call,
    PushRelay,
    relay,
    relay_translated,
    release,
)
from console.gateway.services import key_digest, secret_from_headers
from console.gateway.snapshot import KeyInfo
from console.gateway.upstream import (
    Unreachable,
    UpstreamError,
    UpstreamResponse,
)
from console.gateway.upstream_errors import upstream_error


async def models(req: Request) -> Response:
    """``GET /v1/models``: the models a serving cluster answers for."""
    try:
        if req.method != "GET":
            raise GatewayError(405, "Use GET for /v1/models.")
        secret = secret_from_headers(req.headers)
        snap = await snapshot_or_503((await admit_or_503(None)).version)
        if snap.keys.get(key_digest(secret) if secret else "") is None:
            raise UNAUTHORIZED
    except GatewayError as err:
        return error_response(err, OPENAI)
    now = int(time.time())
    data = [
        {
            "id": name,
            "object": "model",
            "created": now,
            "owned_by": "ascend-vllm-console",
        }
        for name in routing.served_models(snap)
    ]
    return json_response({"object": "list", "data": data})


async def proxy(req: Request, protocol: str, path: str) -> Response | StreamResponse:
    """Authorize, route and relay one request. A request of a key well under its
    limits goes on to the engine before its admission is back (admission.Early);
    when that admission finds the keys or routes changed meanwhile, the request is
    dropped there and authorized again (once: an admitted request is not early)."""
    try:
        return await _proxy(req, protocol, path, None)
    except Restart as restart:
        return await _proxy(req, protocol, path, restart.admission)


async def _proxy(
    req: Request, protocol: str, path: str, admitted: Admission | None
) -> Response | StreamResponse:
    early: Early | None = None
    try:
        key, body, pool, early = await authorized(
            req,
            protocol,
            path,
            early=not path.endswith("count_tokens"),
            admitted=admitted,
        )
        _check_version(req)
        sent = await _route(req, protocol, path, key, body, pool, early)
    except GatewayError as err:
        return error_response(err, protocol)
    finally:
        if early is not None:
            early.close()  # left before its admission was awaited (no-op once it was)
    if isinstance(sent, Response):
        return sent
    call, upstream_resp, translated = sent
    if bool(body.get("stream")) and upstream_resp.status == 200:
        return _answer_stream(call, upstream_resp, body, protocol, translated)
    return await _answer_whole(call, upstream_resp, protocol, translated)


def _check_version(req: Request) -> None:
    version = req.headers.get("anthropic-version")
    if version is not None and not _VERSION.match(version):
        raise GatewayError(
            400,
            "anthropic-version must be an API version such as 2023-06-01.",
            param="anthropic-version",
        )


async def _route(
    req: Request,
    protocol: str,
    path: str,
    key: KeyInfo,
    body: dict[str, Any],
    pool: list[routing.Upstream],
    early: Early | None,
) -> tuple[Call, UpstreamResponse, bool] | Response:
    """Send the request to the least loaded cluster of its pool that takes the
    connection: its call, the engine's response and whether the request was
    translated (Anthropic to OpenAI); or the whole answer of a translated
    count_tokens."""
    model = str(body["model"])
    # Least outstanding first; an engine that refuses the connection (the request
    # never reached it) hands over to the next cluster in the pool.
    for upstream in routing.upstreams_by_load(pool):
        translated = protocol == ANTHROPIC and not upstream.has(
            routing.COUNT_TOKENS_SINCE
            if path.endswith("count_tokens")
            else routing.MESSAGES_SINCE
        )
        if translated and path.endswith("count_tokens"):
            try:
                return await _count_tokens_translated(req, body, upstream)
            except Unreachable:
                await upstream_error(upstream.cluster_id)
                continue
        send_path, data = outbound.upstream_request(
            req, protocol, path, body, translated
        )
        call = Call(key, model, upstream, body, len(req.body))
        try:
            upstream_resp = await outbound.sent(req, upstream, send_path, data, early)
        except (Restart, Refused):  # the request was not admitted as sent
            await call.finish(counted=False)
            raise
        except Unreachable:
            await upstream_error(upstream.cluster_id)
            await call.finish(counted=False)
            continue
        except GatewayError:
            await upstream_error(upstream.cluster_id)
            await call.finish()
            raise
        except BaseException:
            await call.finish()
            raise
        if upstream_resp.status >= 500:
            await upstream_error(upstream.cluster_id)
        return call, upstream_resp, translated
    if early is not None:
        await early.settle()  # the pool it was refused by may be gone
    names = ", ".join(u.cluster_name for u in pool)
    raise GatewayError(
        502,
        f"No cluster serving `{model}` accepted the connection ({names}); "
        "retry shortly.",
        retry_after=5,
    )


async def _answer_whole(
    call: Call, upstream_resp: UpstreamResponse, protocol: str, translated: bool
) -> Response:
    """A non-streamed answer (or an engine's refusal of a stream), read whole."""
    try:
        raw = await upstream_resp.read()
    except (TimeoutError, UpstreamError):
        await upstream_error(call.upstream.cluster_id)
        call.usage.setdefault("completion_tokens", 0)  # the engine's fault
        await release(call, upstream_resp)
        return error_response(
            GatewayError(
                502,
                f"Cluster {call.upstream.cluster_name} broke off its answer; "
                "retry shortly.",
                retry_after=5,
            ),
            protocol,
        )
    except BaseException:  # client gone (cancelled)
        await release(call, upstream_resp)
        raise
    upstream_resp.release()
    return await _plain(call, raw, upstream_resp, protocol, translated)


def _answer_stream(
    call: Call,
    upstream_resp: UpstreamResponse,
    body: dict[str, Any],
    protocol: str,
    translated: bool,
) -> StreamResponse:
    """A streamed answer, relayed event by event (pushed straight to the client's
    transport where the protocol needs no translation)."""
    call.streamed = True
    if translated:
        return StreamResponse(relay_translated(call, upstream_resp))
    client_wants_usage = isinstance(body.get("stream_options"), dict) and bool(
        body["stream_options"].get("include_usage")
    )
    drop = protocol == OPENAI and not client_wants_usage
    chunks = relay(call, upstream_resp, drop_usage_chunk=drop)
    push = PushRelay(
        call, upstream_resp, drop_usage_chunk=drop, openai=protocol == OPENAI
    )
    return StreamResponse(chunks, push=push)


_VERSION = re.compile(r"^[A-Za-z0-9._-]{1,32}\Z")  # anthropic-version, passed on


async def _plain(
    call: Call,
    raw: bytes,
    resp: UpstreamResponse,
    protocol: str,
    translated: bool,
) -> Response:
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    call.read_usage(data)
    if resp.status >= 400 and "completion_tokens" not in call.usage:
        call.usage["completion_tokens"] = 0  # refused: nothing was generated
    await call.finish()
    if (
        translated
        and resp.status == 200
        and isinstance(data, dict)
        and "choices" in data
    ):
        return json_response(translate.chat_to_message(data, call.model))
    if translated and resp.status >= 400:
        err = GatewayError(resp.status, translate.openai_error_to_anthropic(data))
        return error_response(err, protocol)
    headers = {}
    if "retry-after" in resp.headers:
        headers["Retry-After"] = resp.headers["retry-after"]
    return Response(
        resp.status,
        raw,
        content_type=resp.headers.get("content-type", "application/json"),
        headers=headers,
    )


async def _count_tokens_translated(
    req: Request, body: dict[str, Any], upstream: routing.Upstream
) -> Response:
    """count_tokens on an engine without it: the engine's /tokenize with the translated
    chat messages."""
    chat = translate.messages_to_chat(
        {**body, "max_tokens": body.get("max_tokens") or 1, "stream": False}
    )
    resp = await outbound.send(
        req,
        upstream,
        "/tokenize",
        outbound.encode({"model": chat["model"], "messages": chat["messages"]}),
    )
    try:
        raw = await resp.read()
    except (TimeoutError, UpstreamError):
        raise GatewayError(
            502, f"Cluster {upstream.cluster_name} broke off its answer; retry shortly."
        ) from None
    finally:
        resp.release()
    try:
        data = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        data = {}
    if resp.status != 200:
        return error_response(
            GatewayError(resp.status, translate.openai_error_to_anthropic(data)),
            ANTHROPIC,
        )
    return json_response({"input_tokens": int(data.get("count", 0))})


ROUTES = {
    "/v1/chat/completions": (OPENAI, "/v1/chat/completions"),
    "/v1/completions": (OPENAI, "/v1/completions"),
    "/v1/messages": (ANTHROPIC, "/v1/messages"),
    "/v1/messages/count_tokens": (ANTHROPIC, "/v1/messages/count_tokens"),
}


async def dispatch(req: Request) -> Response | StreamResponse:
    """The handler for ``req.path`` (404 in OpenAI's shape for any other /v1 path)."""
    if req.path == "/v1/models":
        return await models(req)
    route = ROUTES.get(req.path)
    if route is None:
        return error_response(
            GatewayError(404, f"No such endpoint: {req.path[:200]!r}."), OPENAI
        )
    return await proxy(req, *route)
