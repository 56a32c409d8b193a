"""The HTTP client to the engines: one aiohttp session (a pool of keep-alive
connections) per event loop, streaming, no retries on POST.

aiohttp rather than httpx on this path: a relayed stream costs a read and a write per
token, and aiohttp's C parser and flat stream reader spend a fraction of the CPU that
httpx/httpcore/h11/anyio spend per chunk (measured with tests/bench/bench_gateway.py;
README, "Performance").
"""

from __future__ import annotations

import asyncio
import weakref

import aiohttp
from django.conf import settings

from console.gateway.ratelimit import redis_close

_sessions: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, aiohttp.ClientSession
] = weakref.WeakKeyDictionary()


def upstream_client() -> aiohttp.ClientSession:
    """The pooled session of the running event loop."""
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(
                total=None,
                sock_connect=settings.GATEWAY_CONNECT_TIMEOUT_S,
                # how long an engine may take to answer (streams: between two chunks)
                sock_read=settings.GATEWAY_UPSTREAM_TIMEOUT_S,
            ),
            auto_decompress=False,
            # engines are on the cluster network, never behind the console's proxy
            trust_env=False,
            skip_auto_headers=("User-Agent",),
        )
    return session


async def upstream_close() -> None:
    """Close the running loop's session (a loop that ends after one request: Django's
    async-to-sync path for the test client)."""

    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()
    await redis_close()
