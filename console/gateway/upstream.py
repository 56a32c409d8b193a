"""The HTTP client to the engines: one httpx.AsyncClient per event loop, streaming, no
retries on POST."""

from __future__ import annotations

import asyncio

import httpx
from django.conf import settings

_clients: dict[int, httpx.AsyncClient] = {}


def upstream_client() -> httpx.AsyncClient:
    """The pooled client of the running event loop."""
    loop = id(asyncio.get_running_loop())
    if loop not in _clients:
        _clients[loop] = httpx.AsyncClient(
            timeout=httpx.Timeout(
                settings.GATEWAY_UPSTREAM_TIMEOUT_S,
                connect=settings.GATEWAY_CONNECT_TIMEOUT_S,
            ),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            # engines are on the cluster network, never behind the console's proxy
            trust_env=False,
        )
    return _clients[loop]
