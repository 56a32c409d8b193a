"""``/v1/...``: OpenAI and Anthropic endpoints in front of the clusters (API-key auth,
no session), served by the gateway's own ASGI app (console.gateway.app).

A request costs, before it is sent on: a sha256 of its key, a lookup of key and
route in the process's snapshot, one Redis round trip (cache version + rate limit),
and a pooled connection to the engine. After the answer: one Redis round trip
(tokens against the limit + usage counters).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from django.conf import settings

from console.gateway import ratelimit, routing, snapshot, translate
from console.gateway.errors import ANTHROPIC, OPENAI, GatewayError, error_response
from console.gateway.http import Request, Response, StreamResponse, json_response
from console.gateway.services import key_digest, secret_from_headers
from console.gateway.signals import upstream_error
from console.gateway.snapshot import KeyInfo, Snapshot
from console.gateway.sse import sse_batches, sse_data, sse_events
from console.gateway.upstream import upstream_client

UNAUTHORIZED = GatewayError(
    401,
    "Missing or invalid API key: send 'Authorization: Bearer <key>' "
    "or 'x-api-key: <key>' "
    "(admins create keys on the API keys page "
    "or with `manage.py apikey create NAME`).",
)


def _json_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise GatewayError(400, "The request body is not UTF-8 JSON.") from None
    except json.JSONDecodeError as exc:
        raise GatewayError(
            400,
            f"The request body is not valid JSON: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}.",
        ) from None
    except RecursionError:
        raise GatewayError(
            400, "The request body nests too deeply: flatten the JSON."
        ) from None
    if not isinstance(body, dict):
        raise GatewayError(400, "The request body must be a JSON object.")
    if body.get("stream_options") is not None and not isinstance(
        body["stream_options"], dict
    ):
        raise GatewayError(
            400,
            'stream_options must be an object, e.g. {"include_usage": true}.',
            param="stream_options",
        )
    if "stream" in body and not isinstance(body["stream"], bool):
        raise GatewayError(400, "stream must be true or false.", param="stream")
    model = body.get("model")
    if isinstance(model, str) and not model.isprintable():
        raise GatewayError(
            400,
            "model must be a served model name without control characters "
            "(GET /v1/models lists them).",
            param="model",
        )
    return body


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_bounds(body: dict[str, Any], protocol: str, path: str, limit: int) -> None:
    """``n`` and the completion length within what the gateway serves: n from 1 to
    GATEWAY_MAX_N, max_tokens from 1 to the model's context length (the smallest
    max_model_len among its serving clusters)."""
    if path.endswith("count_tokens"):
        return
    n = body.get("n")
    if n is not None and (not _positive_int(n) or n > settings.GATEWAY_MAX_N):
        raise GatewayError(
            400,
            f"n must be an integer from 1 to {settings.GATEWAY_MAX_N} "
            "(completions per request on this gateway).",
            param="n",
        )
    fields = (
        ("max_tokens",)
        if protocol == ANTHROPIC
        else ("max_tokens", "max_completion_tokens")
    )
    for name in fields:
        value = body.get(name)
        if value is None:
            if protocol == ANTHROPIC:
                raise GatewayError(
                    400, "max_tokens is required: a positive integer.", param=name
                )
            continue
        if not _positive_int(value) or (limit and value > limit):
            bound = (
                f"from 1 to {limit} (the model's context length)"
                if limit
                else "of at least 1"
            )
            raise GatewayError(400, f"{name} must be an integer {bound}.", param=name)


async def _authorized(
    req: Request, protocol: str, path: str
) -> tuple[KeyInfo, dict[str, Any], list[routing.Upstream], Snapshot]:
    """Key, body, pool and the snapshot they came from; one Redis round trip when the
    snapshot is current (which it is but for the first request after a change)."""
    if req.method != "POST":
        raise GatewayError(405, f"Use POST for {path}.")
    secret = secret_from_headers(req.headers)
    digest = key_digest(secret) if secret else ""
    snap = snapshot.current()
    key = snap.keys.get(digest)
    body: dict[str, Any] | None = None
    body_error: GatewayError | None = None
    try:
        body = _json_body(req.body)
    except GatewayError as err:
        body_error = err
    pool: list[routing.Upstream] = []
    if key is not None and body is not None:
        try:
            pool = routing.route(snap, body.get("model"))
            limit = snap.models[body["model"]].max_model_len
            _check_bounds(body, protocol, path, limit)
        except GatewayError:
            pool = []
    # Count the request now only if it looks admissible on this snapshot.
    admission = await ratelimit.admit(key.prefix if key and pool else None)
    if admission.version != snap.version:
        snap = await snapshot.snapshot_for(admission.version)
        fresh = snap.keys.get(digest)
        if fresh is None or key is None or fresh.prefix != key.prefix:
            admission.counted = False
        key = fresh
    if key is None:
        raise UNAUTHORIZED
    if body_error is not None or body is None:
        raise body_error or GatewayError(400, "The request body must be a JSON object.")
    pool = routing.route(snap, body.get("model"))
    _check_bounds(body, protocol, path, snap.models[body["model"]].max_model_len)
    if not admission.counted:
        admission = await ratelimit.admit(key.prefix)
    ratelimit.check_limits(admission, rpm=key.rpm, tpm=key.tpm)
    return key, body, pool, snap


async def models(req: Request) -> Response:
    """``GET /v1/models``: the models a serving cluster answers for."""
    try:
        if req.method != "GET":
            raise GatewayError(405, "Use GET for /v1/models.")
        secret = secret_from_headers(req.headers)
        snap = await snapshot.snapshot_for(await ratelimit.cache_version())
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


class _Call:
    """One proxied request's bookkeeping: the upstream it holds, the tokens it used,
    released exactly once."""

    def __init__(
        self,
        key: KeyInfo,
        model: str,
        upstream: routing.Upstream,
        body: dict[str, Any],
        size: int,
    ) -> None:
        self.key, self.model, self.upstream = key, model, upstream
        self.usage: dict[str, int] = {}
        self.events = 0  # engine events relayed (each carries at least one token)
        self.streamed = False
        self.complete = False  # the engine's stream ended whole (its usage is final)
        self.broken = False
        n = body.get("n") if _positive_int(body.get("n")) else 1
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        self.most = n * limit if _positive_int(limit) else 0
        self.prompt_estimate = size // 4 + 1  # ~4 bytes a token; no tokenizer here
        self.done = False
        routing.outstanding_enter(upstream)

    def read_usage(self, data: Any) -> None:
        """Take token counts from an OpenAI or Anthropic body/event (whichever fields it
        has)."""
        if not isinstance(data, dict):
            return
        usage = data.get("usage") or (data.get("message") or {}).get("usage")
        if not isinstance(usage, dict):
            return
        for src, dst in (
            ("prompt_tokens", "prompt_tokens"),
            ("completion_tokens", "completion_tokens"),
            ("input_tokens", "prompt_tokens"),
            ("output_tokens", "completion_tokens"),
        ):
            if isinstance(usage.get(src), int) and usage[src] > 0:
                self.usage[dst] = usage[src]

    def tokens(self) -> tuple[int, int]:
        """(prompt, completion): the engine's count; without one (the client hung up
        before the usage chunk, or the engine broke off), an estimate that is never
        below what was relayed: the events streamed, or the most the request could
        produce (n x max_tokens) when it was not streamed."""
        if self.streamed:
            prompt = self.usage.get("prompt_tokens") or self.prompt_estimate
            completion = self.usage.get("completion_tokens", 0)
            if self.complete:
                return prompt, completion
            return prompt, max(completion, self.events)
        if "completion_tokens" in self.usage:
            return self.usage.get("prompt_tokens", 0), self.usage["completion_tokens"]
        return self.usage.get("prompt_tokens") or self.prompt_estimate, self.most

    async def finish(self, *, counted: bool = True) -> None:
        """Release the upstream slot, then count the request if it reached an engine."""
        if self.done:
            return
        self.done = True
        routing.outstanding_leave(self.upstream)
        if not counted:
            return
        prompt, completion = self.tokens()
        await ratelimit.spend(
            bucket=self.key.prefix,
            key_id=self.key.pk,
            model=self.model,
            prompt=prompt,
            completion=completion,
        )


async def proxy(req: Request, protocol: str, path: str) -> Response | StreamResponse:
    try:
        key, body, pool, _ = await _authorized(req, protocol, path)
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
                except _Unreachable:
                    await upstream_error(upstream.cluster_id)
                    continue
            send_path, send_body = _upstream_request(protocol, path, body, translated)
            data = req.body if send_body is body else _encode(send_body)
            call = _Call(key, model, upstream, body, len(req.body))
            try:
                upstream_resp = await _send(req, upstream, send_path, data)
            except _Unreachable:
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
            break
        else:
            names = ", ".join(u.cluster_name for u in pool)
            raise GatewayError(
                502,
                f"No cluster serving `{model}` accepted the connection ({names}); "
                "retry shortly.",
                retry_after=5,
            )
    except GatewayError as err:
        return error_response(err, protocol)
    stream = bool(body.get("stream")) and upstream_resp.status == 200
    if not stream:
        try:
            raw = await upstream_resp.read()
        except (TimeoutError, aiohttp.ClientError):
            await upstream_error(upstream.cluster_id)
            await _release(call, upstream_resp)
            return error_response(
                GatewayError(
                    502,
                    f"Cluster {upstream.cluster_name} broke off its answer; retry shortly.",
                    retry_after=5,
                ),
                protocol,
            )
        except BaseException:  # client gone (cancelled)
            await _release(call, upstream_resp)
            raise
        upstream_resp.release()
        return await _plain(call, raw, upstream_resp, protocol, translated)
    call.streamed = True
    client_wants_usage = isinstance(body.get("stream_options"), dict) and bool(
        body["stream_options"].get("include_usage")
    )
    if translated:
        relay = _relay_translated(call, upstream_resp)
    else:
        relay = _relay(
            call,
            upstream_resp,
            drop_usage_chunk=protocol == OPENAI and not client_wants_usage,
        )
    return StreamResponse(relay)


def _upstream_request(
    protocol: str, path: str, body: dict[str, Any], translated: bool
) -> tuple[str, dict[str, Any]]:
    """The engine path and body for a client request."""
    if translated:
        return "/v1/chat/completions", translate.messages_to_chat(body)
    if protocol == OPENAI and body.get("stream"):
        # Ask for the usage chunk so the key's tokens can be counted; the client
        # still sees its own choice.
        opts: dict[str, Any] = body.get("stream_options") or {}
        return path, {**body, "stream_options": {**opts, "include_usage": True}}
    return path, body


class _Unreachable(Exception):
    """The engine refused or timed out the connection: the request never reached it."""


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


async def _send(
    req: Request, upstream: routing.Upstream, path: str, data: bytes
) -> aiohttp.ClientResponse:
    """POST ``data`` (the client's body as it came, or the gateway's rewrite)."""
    headers = {
        "Content-Type": "application/json",
        "X-Request-ID": req.headers.get("x-request-id") or uuid.uuid4().hex,
    }
    if req.headers.get("anthropic-version"):
        headers["anthropic-version"] = req.headers["anthropic-version"]
    if upstream.api_key:
        # vLLM's --api-key guards /v1/* with this bearer token (vllm/entrypoints/
        # openai/api_server.py, AuthenticationMiddleware)
        headers["Authorization"] = f"Bearer {upstream.api_key}"
    try:
        return await upstream_client().post(
            upstream.base_url + path,
            data=data,
            headers=headers,
        )
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
        raise _Unreachable(str(exc)) from None
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise GatewayError(
            502,
            f"Cluster {upstream.cluster_name} did not answer "
            f"({type(exc).__name__}); retry shortly.",
            retry_after=5,
        ) from None


async def _plain(
    call: _Call,
    raw: bytes,
    resp: aiohttp.ClientResponse,
    protocol: str,
    translated: bool,
) -> Response:
    try:
        data: Any = json.loads(raw)
    except ValueError:
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


async def _chunks(call: _Call, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The engine's body as it arrives; an engine that breaks off or stalls past
    GATEWAY_UPSTREAM_TIMEOUT_S ends it (and is counted for alerting)."""
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    except (TimeoutError, aiohttp.ClientError):
        call.broken = True
        await upstream_error(call.upstream.cluster_id)


async def _relay(
    call: _Call, resp: aiohttp.ClientResponse, *, drop_usage_chunk: bool
) -> AsyncIterator[bytes]:
    """Pass each upstream event on as it arrives; closing this generator (client gone)
    closes the upstream stream."""
    try:
        async for events in sse_batches(_chunks(call, resp)):
            call.events += len(events)
            if any(b'"usage"' in event for event in events):
                kept = []
                for event in events:
                    if b'"usage"' in event:
                        data = sse_data(event)
                        call.read_usage(data)
                        if (
                            drop_usage_chunk
                            and isinstance(data, dict)
                            and data.get("choices") == []
                        ):
                            continue  # the usage chunk the gateway asked for
                    kept.append(event)
                events = kept
            if events:
                yield events[0] if len(events) == 1 else b"".join(events)
        call.complete = not call.broken
    finally:
        await _release(call, resp)


async def _counted(call: _Call, events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    async for event in events:
        call.events += 1
        yield event


async def _relay_translated(
    call: _Call, resp: aiohttp.ClientResponse
) -> AsyncIterator[bytes]:
    try:
        async for frame in translate.chat_stream_to_messages(
            _counted(call, sse_events(_chunks(call, resp))), call.model, call.usage
        ):
            yield frame
        call.complete = not call.broken
    finally:
        await _release(call, resp)


async def _release(call: _Call, resp: aiohttp.ClientResponse) -> None:
    """Hand the connection back (answer read whole) or close it, then count the
    request, even if closing fails.

    On a client disconnect, closing drops the engine's connection mid-answer, which
    the engine sees as an abort (vLLM frees the sequence's KV cache).
    """
    try:
        if resp.content.at_eof():
            resp.release()
        else:
            resp.close()
    finally:
        await call.finish()


async def _count_tokens_translated(
    req: Request, body: dict[str, Any], upstream: routing.Upstream
) -> Response:
    """count_tokens on an engine without it: the engine's /tokenize with the translated
    chat messages."""
    chat = translate.messages_to_chat(
        {**body, "max_tokens": body.get("max_tokens") or 1, "stream": False}
    )
    resp = await _send(
        req,
        upstream,
        "/tokenize",
        _encode({"model": chat["model"], "messages": chat["messages"]}),
    )
    try:
        raw = await resp.read()
    except (TimeoutError, aiohttp.ClientError):
        raise GatewayError(
            502, f"Cluster {upstream.cluster_name} broke off its answer; retry shortly."
        ) from None
    finally:
        resp.release()
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
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
