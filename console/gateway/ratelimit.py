"""Per-key rate limits in Redis: requests and tokens per fixed one-minute window.

Requests are counted when admitted; tokens when the answer's usage is known, so a
key over its token budget is refused from its next request until the window ends.
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis
from django.conf import settings

from console.gateway.errors import GatewayError

_clients: dict[int, aioredis.Redis] = {}
WINDOW_S = 60


def _redis() -> aioredis.Redis:
    """One client per event loop (a redis.asyncio connection cannot cross loops)."""
    loop = id(asyncio.get_running_loop())
    if loop not in _clients:
        _clients[loop] = aioredis.Redis.from_url(str(settings.REDIS_URL))
    return _clients[loop]


def _window() -> tuple[int, int]:
    now = time.time()
    start = int(now // WINDOW_S) * WINDOW_S
    return start, max(1, int(start + WINDOW_S - now + 0.999))


async def ratelimit_admit(*, bucket: str, rpm: int, tpm: int) -> None:
    """Count one request against the key's window; raise GatewayError(429) with Retry-
    After past either limit."""
    start, retry_after = _window()
    req_key, tok_key = f"gw:rl:{bucket}:{start}:req", f"gw:rl:{bucket}:{start}:tok"
    async with _redis().pipeline(transaction=True) as pipe:
        pipe.incr(req_key)
        pipe.expire(req_key, WINDOW_S * 2)
        pipe.get(tok_key)
        count, _, tokens = await pipe.execute()
    if count > rpm:
        raise GatewayError(
            429,
            f"Rate limit reached: {rpm} requests per minute for this key. "
            f"Retry after {retry_after} s.",
            retry_after=retry_after,
        )
    if int(tokens or 0) >= tpm:
        raise GatewayError(
            429,
            f"Rate limit reached: {tpm} tokens per minute for this key. "
            f"Retry after {retry_after} s.",
            retry_after=retry_after,
        )


async def ratelimit_spend(*, bucket: str, tokens: int) -> None:
    """Add a finished request's tokens to the key's current window."""
    if tokens <= 0:
        return
    start, _ = _window()
    tok_key = f"gw:rl:{bucket}:{start}:tok"
    async with _redis().pipeline(transaction=True) as pipe:
        pipe.incrby(tok_key, tokens)
        pipe.expire(tok_key, WINDOW_S * 2)
        await pipe.execute()
