"""``/v1/...``: OpenAI and Anthropic endpoints in front of the clusters (async views;
API-key auth, no session)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from console.gateway import routing, translate
from console.gateway.errors import ANTHROPIC, OPENAI, GatewayError, error_response
from console.gateway.ratelimit import ratelimit_admit, ratelimit_spend
from console.gateway.services import apikey_authenticate, secret_from_headers
from console.gateway.signals import upstream_error
from console.gateway.sse import sse_data, sse_events
from console.gateway.upstream import upstream_client
from console.gateway.usage import usage_add, usage_maybe_flush
from console.models import ApiKey

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}  # nginx must not buffer SSE


async def _authenticate(request: HttpRequest) -> ApiKey:
    key = await apikey_authenticate(secret_from_headers(request.headers))
    if key is None:
        raise GatewayError(
            401,
            "Missing or invalid API key: send 'Authorization: Bearer <key>' "
            "or 'x-api-key: <key>' "
            "(admins create keys on the API keys page "
            "or with `manage.py apikey create NAME`).",
        )
    return key


def _json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body)
    except UnicodeDecodeError:
        raise GatewayError(400, "The request body is not UTF-8 JSON.") from None
    except json.JSONDecodeError as exc:
        raise GatewayError(
            400,
            f"The request body is not valid JSON: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}.",
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
    return body


@csrf_exempt
async def models(request: HttpRequest) -> HttpResponse:
    """``GET /v1/models``: the models a serving cluster answers for."""
    try:
        if request.method != "GET":
            raise GatewayError(405, "Use GET for /v1/models.")
        await _authenticate(request)
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
        for name in await routing.served_models()
    ]
    return JsonResponse({"object": "list", "data": data})


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    return await _proxy(request, OPENAI, "/v1/chat/completions")


@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponseBase:
    return await _proxy(request, OPENAI, "/v1/completions")


@csrf_exempt
async def messages(request: HttpRequest) -> HttpResponseBase:
    return await _proxy(request, ANTHROPIC, "/v1/messages")


@csrf_exempt
async def count_tokens(request: HttpRequest) -> HttpResponseBase:
    return await _proxy(request, ANTHROPIC, "/v1/messages/count_tokens")


class _Call:
    """One proxied request's bookkeeping: the upstream it holds, the tokens it used,
    released exactly once."""

    def __init__(self, key: ApiKey, model: str, upstream: routing.Upstream) -> None:
        self.key, self.model, self.upstream = key, model, upstream
        self.usage: dict[str, int] = {}
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

    async def finish(self, *, counted: bool = True) -> None:
        """Release the upstream slot, then count the request if it reached an engine."""
        if self.done:
            return
        self.done = True
        routing.outstanding_leave(self.upstream)
        if not counted:
            return
        prompt, completion = (
            self.usage.get("prompt_tokens", 0),
            self.usage.get("completion_tokens", 0),
        )
        usage_add(
            key_id=self.key.pk,
            model=self.model,
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
        await ratelimit_spend(bucket=self.key.prefix, tokens=prompt + completion)
        await usage_maybe_flush()


async def _proxy(request: HttpRequest, protocol: str, path: str) -> HttpResponseBase:
    try:
        if request.method != "POST":
            raise GatewayError(405, f"Use POST for {path}.")
        key = await _authenticate(request)
        body = _json_body(request)
        model = body.get("model")
        pool = await routing.upstreams_for(model)  # type: ignore[arg-type]
        await ratelimit_admit(bucket=key.prefix, rpm=key.rpm, tpm=key.tpm)
        # Least outstanding first; an engine that refuses the connection (the request
        # never reached it) hands over to the next cluster in the pool.
        for upstream in routing.upstreams_by_load(pool):
            translated = protocol == ANTHROPIC and not upstream.has(
                routing.COUNT_TOKENS_SINCE
                if path.endswith("count_tokens")
                else routing.MESSAGES_SINCE
            )
            if translated and path.endswith("count_tokens"):
                return await _count_tokens_translated(request, key, body, upstream)
            send_path, send_body = _upstream_request(protocol, path, body, translated)
            call = _Call(key, str(model), upstream)
            try:
                upstream_resp = await _send(request, upstream, send_path, send_body)
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
            if upstream_resp.status_code >= 500:
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
    stream = bool(body.get("stream")) and upstream_resp.status_code == 200
    if not stream:
        try:
            raw = await upstream_resp.aread()
        except BaseException:  # client gone (cancelled) or engine broke off
            await _release(call, upstream_resp)
            raise
        await upstream_resp.aclose()
        return await _plain(call, raw, upstream_resp, protocol, translated)
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
    return StreamingHttpResponse(
        relay, content_type="text/event-stream", headers=STREAM_HEADERS
    )


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


async def _send(
    request: HttpRequest, upstream: routing.Upstream, path: str, body: dict[str, Any]
) -> httpx.Response:
    headers = {
        "Content-Type": "application/json",
        "X-Request-ID": request.headers.get("X-Request-ID") or uuid.uuid4().hex,
    }
    if request.headers.get("anthropic-version"):
        headers["anthropic-version"] = request.headers["anthropic-version"]
    client = upstream_client()
    req = client.build_request(
        "POST",
        upstream.base_url + path,
        content=json.dumps(body).encode(),
        headers=headers,
    )
    try:
        return await client.send(req, stream=True)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise _Unreachable(str(exc)) from None
    except httpx.HTTPError as exc:
        raise GatewayError(
            502,
            f"Cluster {upstream.cluster_name} did not answer "
            f"({type(exc).__name__}); retry shortly.",
            retry_after=5,
        ) from None


async def _plain(
    call: _Call, raw: bytes, resp: httpx.Response, protocol: str, translated: bool
) -> HttpResponse:
    try:
        data: Any = json.loads(raw)
    except ValueError:
        data = None
    call.read_usage(data)
    await call.finish()
    if (
        translated
        and resp.status_code == 200
        and isinstance(data, dict)
        and "choices" in data
    ):
        return JsonResponse(translate.chat_to_message(data, call.model))
    if translated and resp.status_code >= 400:
        err = GatewayError(resp.status_code, translate.openai_error_to_anthropic(data))
        return error_response(err, protocol)
    out = HttpResponse(
        raw,
        status=resp.status_code,
        content_type=resp.headers.get("content-type", "application/json"),
    )
    if "retry-after" in resp.headers:
        out["Retry-After"] = resp.headers["retry-after"]
    return out


async def _relay(
    call: _Call, resp: httpx.Response, *, drop_usage_chunk: bool
) -> AsyncIterator[bytes]:
    """Pass each upstream event on as it arrives; closing this generator (client gone)
    closes the upstream stream."""
    try:
        async for event in sse_events(resp.aiter_raw()):
            if b'"usage"' in event:
                data = sse_data(event)
                call.read_usage(data)
                if (
                    drop_usage_chunk
                    and isinstance(data, dict)
                    and data.get("choices") == []
                ):
                    continue  # the usage chunk the gateway asked for, not the client
            yield event
    finally:
        await _release(call, resp)


async def _relay_translated(call: _Call, resp: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for frame in translate.chat_stream_to_messages(
            sse_events(resp.aiter_raw()), call.model, call.usage
        ):
            yield frame
    finally:
        await _release(call, resp)


async def _release(call: _Call, resp: httpx.Response) -> None:
    """Close the engine stream, then count the request, even if closing fails.

    On a client disconnect, closing drops the engine's connection mid-answer, which
    the engine sees as an abort (vLLM frees the sequence's KV cache).
    """
    try:
        await resp.aclose()
    finally:
        await call.finish()


async def _count_tokens_translated(
    request: HttpRequest, key: ApiKey, body: dict[str, Any], upstream: routing.Upstream
) -> HttpResponse:
    """count_tokens on an engine without it: the engine's /tokenize with the translated
    chat messages."""
    chat = translate.messages_to_chat(
        {**body, "max_tokens": body.get("max_tokens") or 1, "stream": False}
    )
    resp = await _send(
        request,
        upstream,
        "/tokenize",
        {"model": chat["model"], "messages": chat["messages"]},
    )
    try:
        raw = await resp.aread()
    finally:
        await resp.aclose()
    data = json.loads(raw) if raw else {}
    if resp.status_code != 200:
        return error_response(
            GatewayError(resp.status_code, translate.openai_error_to_anthropic(data)),
            ANTHROPIC,
        )
    return JsonResponse({"input_tokens": int(data.get("count", 0))})
