"""Admission of a /v1 request: its key, its body, its route and the bounds on what it
asks for, checked against the process's snapshot, and its rate limit — one Redis
round trip when the snapshot is current (all but the first request after a change).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import redis
from django.conf import settings
from django.db import DatabaseError

from console.gateway import ratelimit, routing, snapshot
from console.gateway.errors import ANTHROPIC, GatewayError
from console.gateway.http import Request
from console.gateway.services import key_digest, secret_from_headers
from console.gateway.snapshot import KeyInfo, Snapshot

log = logging.getLogger(__name__)

UNAUTHORIZED = GatewayError(
    401,
    "Missing or invalid API key: send 'Authorization: Bearer <key>' "
    "or 'x-api-key: <key>' "
    "(admins create keys on the API keys page "
    "or with `manage.py apikey create NAME`).",
)


def _json_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object, parsed by orjson: stricter than the stdlib where
    the stdlib goes beyond RFC 8259 (NaN and Infinity, lone surrogates, numbers past
    a double: 400 here, as a JSON parser in the engine may refuse them too) and 2x
    faster on a long prompt (docs/gateway-performance.md)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in exc.msg:  # orjson stops at 1024 levels
            raise GatewayError(
                400, "The request body nests too deeply: flatten the JSON."
            ) from None
        what = "UTF-8 JSON" if "UTF-8" in exc.msg else "valid JSON"
        raise GatewayError(
            400,
            f"The request body is not {what}: {exc.msg} "
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
    model = body.get("model")
    if isinstance(model, str) and not model.isprintable():
        raise GatewayError(
            400,
            "model must be a served model name without control characters "
            "(GET /v1/models lists them).",
            param="model",
        )
    return body


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_bounds(body: dict[str, Any], protocol: str, path: str, limit: int) -> None:
    """``n`` and the completion length within what the gateway serves: n from 1 to
    GATEWAY_MAX_N, max_tokens from 1 to the model's context length (the smallest
    max_model_len among its serving clusters)."""
    if path.endswith("count_tokens"):
        return
    n = body.get("n")
    if n is not None and (not positive_int(n) or n > settings.GATEWAY_MAX_N):
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
        if not positive_int(value) or (limit and value > limit):
            bound = (
                f"from 1 to {limit} (the model's context length)"
                if limit
                else "of at least 1"
            )
            raise GatewayError(400, f"{name} must be an integer {bound}.", param=name)


def _limiter_unreachable(
    exc: redis.RedisError, error: type[GatewayError] = GatewayError
) -> GatewayError:
    log.warning("gateway rate limiter unreachable: %s", exc)
    return error(
        503, "The gateway's rate limiter is unreachable; retry shortly.", retry_after=5
    )


async def admit_or_503(bucket: str | None) -> ratelimit.Admission:
    try:
        return await ratelimit.admit(bucket)
    except redis.RedisError as exc:
        raise _limiter_unreachable(exc) from None


async def snapshot_or_503(version: int) -> Snapshot:
    try:
        return await snapshot.snapshot_for(version)
    except DatabaseError as exc:
        log.warning("gateway could not load keys and routes: %s", exc)
        raise GatewayError(
            503,
            "The gateway cannot read its keys and routes; retry shortly.",
            retry_after=5,
        ) from None


class Restart(Exception):  # noqa: N818  (control flow, not a failure)
    """The snapshot changed while a request went on early: it is dropped and
    authorized again on the new one (this admission, counted, goes with it)."""

    def __init__(self, admission: ratelimit.Admission) -> None:
        super().__init__("the gateway's keys or routes changed")
        self.admission = admission


class Refused(GatewayError):
    """An early request's admission said no (429, 503): not the engine's fault."""


class Early:
    """The admission of a request sent on before its reply was in: a key the process
    knows, with a route, well under its limits (ratelimit.comfortable). The reply
    is awaited once the engine has the request, before a byte of the answer goes
    out, so the Redis round trip is off the request's way to the engine, and a
    revoked key, a pool change or a limit reached still decide the answer."""

    def __init__(self, key: KeyInfo, snap: Snapshot) -> None:
        self.key, self.snap = key, snap
        self.reply, self.start = ratelimit.admit_later(key.prefix)
        ratelimit.early_start(key.prefix)
        self.settled = False

    async def settle(self) -> None:
        """Return when the request stands as sent; raise Restart (the snapshot
        changed) or Refused (over a limit, the limiter unreachable)."""
        if self.settled:
            return
        self.settled = True
        try:
            raw = await self.reply
        except redis.RedisError as exc:
            raise _limiter_unreachable(exc, Refused) from None
        finally:
            ratelimit.early_end(self.key.prefix)
        admission = ratelimit.admission_of(raw, self.key.prefix, self.start)
        if admission.version != self.snap.version:
            raise Restart(admission)
        try:
            ratelimit.check_limits(admission, rpm=self.key.rpm, tpm=self.key.tpm)
        except GatewayError as err:
            raise Refused(
                err.status, err.message, retry_after=err.retry_after
            ) from None

    def close(self) -> None:
        """The request ended before its admission was awaited (the client left)."""
        if not self.settled:
            self.settled = True
            ratelimit.early_end(self.key.prefix)
            self.reply.add_done_callback(_quiet)


def _quiet(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: no "never retrieved" warning


async def authorized(
    req: Request,
    protocol: str,
    path: str,
    *,
    early: bool = False,
    admitted: ratelimit.Admission | None = None,
) -> tuple[KeyInfo, dict[str, Any], list[routing.Upstream], Early | None]:
    """Key, body, pool and, when the request may go on before its admission is back
    (``early``, and the key is known, routed and well under its limits), that
    admission in flight; else one Redis round trip (``admitted``: one made
    already) when the snapshot is current (which it is but for the first request
    after a change)."""
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
    if (
        early
        and admitted is None
        and key is not None
        and body is not None
        and pool
        and ratelimit.comfortable(key.prefix, rpm=key.rpm, tpm=key.tpm)
    ):
        return key, body, pool, Early(key, snap)
    # Count the request now only if it looks admissible on this snapshot.
    admission = admitted or await admit_or_503(key.prefix if key and pool else None)
    if admission.version != snap.version:
        snap = await snapshot_or_503(admission.version)
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
        admission = await admit_or_503(key.prefix)
    ratelimit.check_limits(admission, rpm=key.rpm, tpm=key.tpm)
    return key, body, pool, None
