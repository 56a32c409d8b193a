"""Per-key rate limits in Redis: requests and tokens per fixed one-minute window.

A request costs one Redis round trip for its admission (``admit``: the cache
version, and when the key is known the request count and the window's tokens — one
Lua script; sent before the request goes on, or beside it for a key well under its
limits: ``comfortable``, console.gateway.admission.Early) and one after its answer (``spend``: the tokens against the limit and the
usage counters, console.gateway.usage). Requests are counted when admitted; tokens
when the answer's usage is known, so a key over its token budget is refused from its
next request until the window ends. Calls made while a round trip is on the wire share
the next one (console.gateway.batching): a burst of requests costs one round trip.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings

from console.gateway import batching
from console.gateway.batching import run_script
from console.gateway.changes import VERSION_KEY
from console.gateway.errors import GatewayError
from console.gateway.usage import PENDING_KEY, field_prefix, usage_flush_soon

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)
WINDOW_S = 60

# KEYS: version, requests of the window, tokens of the window. ARGV: count? (1/0), ttl
_ADMIT = """
local v = redis.call('GET', KEYS[1]) or '0'
if ARGV[1] == '0' then return {v} end
local c = redis.call('INCR', KEYS[2])
if c == 1 then redis.call('EXPIRE', KEYS[2], ARGV[2]) end
return {v, c, redis.call('GET', KEYS[3]) or '0'}
"""
# KEYS: tokens of the window, pending usage hash.
# ARGV: tokens, ttl, usage field prefix, requests, prompt tokens, completion tokens
_SPEND = """
if tonumber(ARGV[1]) > 0 then
  redis.call('INCRBY', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
redis.call('HINCRBY', KEYS[2], ARGV[3] .. 'r', ARGV[4])
if ARGV[5] ~= '0' then redis.call('HINCRBY', KEYS[2], ARGV[3] .. 'p', ARGV[5]) end
if ARGV[6] ~= '0' then redis.call('HINCRBY', KEYS[2], ARGV[3] .. 'c', ARGV[6]) end
return 1
"""


_last: tuple[asyncio.AbstractEventLoop | None, aioredis.Redis | None] = (None, None)


def _redis() -> aioredis.Redis:
    """One client per event loop (a redis.asyncio connection cannot cross loops); the
    last one found is kept at hand (a server process has one loop)."""
    global _last
    loop = asyncio.get_running_loop()
    if _last[0] is loop and _last[1] is not None:
        return _last[1]
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = aioredis.Redis.from_url(str(settings.REDIS_URL))
    _last = (loop, client)
    return client


async def redis_close() -> None:
    """Close the running loop's client (a loop that ends after one request)."""
    global _last
    client = _clients.pop(asyncio.get_running_loop(), None)
    _last = (None, None)
    if client is not None:
        await batching.drain(client)  # counts held for company go out first
        await batching.close(client)
        await client.aclose()


def _window() -> tuple[int, int]:
    now = time.time()
    start = int(now // WINDOW_S) * WINDOW_S
    return start, max(1, int(start + WINDOW_S - now + 0.999))


@dataclass
class Admission:
    """What one admit round trip found: the cache version and, when counted, the
    window's request count and tokens."""

    version: int
    counted: bool
    requests: int = 0
    tokens: int = 0


def _admit_args(bucket: str | None) -> tuple[int, list[str], list[Any]]:
    start, _ = _window()
    keys = [VERSION_KEY, f"gw:rl:{bucket}:{start}:req", f"gw:rl:{bucket}:{start}:tok"]
    return start, keys, [1 if bucket else 0, WINDOW_S * 2]


def admission_of(raw: Any, bucket: str | None, start: int) -> Admission:
    if bucket is None:
        return Admission(int(raw[0]), False)
    found = Admission(int(raw[0]), True, int(raw[1]), int(raw[2]))
    _seen[bucket] = (start, found.requests, found.tokens)
    return found


async def admit(bucket: str | None) -> Admission:
    """Read the cache version; with a key's ``bucket``, count the request too."""
    start, keys, args = _admit_args(bucket)
    raw = await run_script(_redis(), _ADMIT, keys, args)
    return admission_of(raw, bucket, start)


def admit_later(bucket: str) -> tuple[asyncio.Future[Any], int]:
    """``admit`` sent now, its reply (and its window's start) read later with
    ``admission_of`` (console.gateway.admission.Early)."""
    start, keys, args = _admit_args(bucket)
    return batching.script_future(_redis(), _ADMIT, keys, args), start


# What this process last heard of each key's window, and its requests sent on before
# their admission came back: a key well under its limits by these goes on at once.
_seen: dict[
    str, tuple[int, int, int]
] = {}  # bucket -> (window start, requests, tokens)
_early: dict[str, int] = {}  # bucket -> admissions in flight for requests sent on
HEADROOM = 0.9


def comfortable(bucket: str, *, rpm: int, tpm: int) -> bool:
    """The key's window, as last heard of, is under HEADROOM of both limits even
    with every request already sent on early: this one can go to the engine before
    its admission is back (a key near a limit waits for it, so a client past its
    limit does not reach the engine with request after request)."""
    start, _ = _window()
    seen = _seen.get(bucket)
    if seen is None or seen[0] != start:
        return False  # nothing heard of this window yet
    requests = seen[1] + _early.get(bucket, 0) + 1
    return requests <= rpm * HEADROOM and seen[2] < tpm * HEADROOM


def early_start(bucket: str) -> None:
    _early[bucket] = _early.get(bucket, 0) + 1


def early_end(bucket: str) -> None:
    left = _early.get(bucket, 0) - 1
    if left > 0:
        _early[bucket] = left
    else:
        _early.pop(bucket, None)


async def cache_version() -> int:
    return (await admit(None)).version


def check_limits(admission: Admission, *, rpm: int, tpm: int) -> None:
    """Raise GatewayError(429) with Retry-After past either limit."""
    _, retry_after = _window()
    if admission.requests > rpm:
        raise GatewayError(
            429,
            f"Rate limit reached: {rpm} requests per minute for this key. "
            f"Retry after {retry_after} s.",
            retry_after=retry_after,
        )
    if admission.tokens >= tpm:
        raise GatewayError(
            429,
            f"Rate limit reached: {tpm} tokens per minute for this key. "
            f"Retry after {retry_after} s.",
            retry_after=retry_after,
        )


async def ratelimit_admit(*, bucket: str, rpm: int, tpm: int) -> None:
    """Count one request against the key's window; 429 past either limit."""
    check_limits(await admit(bucket), rpm=rpm, tpm=tpm)


# How long a finished request's count waits for the next admission to go with: one
# round trip for both when requests come one after another (alone, each step of a
# request is a wake-up of its own: docs/gateway-performance.md, 2026-12-07).
SPEND_HOLD_S = 0.02


def spend(
    *, bucket: str, key_id: int, model: str, prompt: int, completion: int
) -> asyncio.Future[Any]:
    """Add a finished request's tokens to the key's window and to the usage counters
    (flushed to the database by console.gateway.usage); the future of its reply.
    Nobody need wait for it: it is sent with the next call of this process's
    batcher or SPEND_HOLD_S later, and before any admission made after it, so the
    key's next request here is checked against these tokens."""
    start, _ = _window()
    keys = [f"gw:rl:{bucket}:{start}:tok", PENDING_KEY]
    tokens = prompt + completion
    args = [tokens, WINDOW_S * 2, field_prefix(key_id, model), 1, prompt, completion]
    future = batching.script_future(_redis(), _SPEND, keys, args, hold=SPEND_HOLD_S)
    if not settings.GATEWAY_USAGE_FLUSH_S:
        future.add_done_callback(_flush_when_counted)
    return future


def _flush_when_counted(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        usage_flush_soon()


async def drain() -> None:
    """Send the counts still held (SPEND_HOLD_S) and wait for them: at shutdown,
    before the last usage flush (a process that counted nothing has no client)."""
    client = _clients.get(asyncio.get_running_loop())
    if client is not None:
        await batching.drain(client)
