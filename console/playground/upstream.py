"""Stream one chat completion from an engine's OpenAI API, event by event.

Leaving the ``async for`` early (Stop, a closed socket) closes the HTTP stream, and the
engine counts the request as aborted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from django.conf import settings

from console.gateway.sse import sse_data, sse_events


class UpstreamError(Exception):
    """The engine refused the request or was unreachable (message is safe to show)."""


async def chat_events(
    *, base_url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Yield the JSON of each chunk of ``POST /v1/chat/completions`` until [DONE]."""
    # The gateway's engine timeouts: between two chunks, and to connect.
    timeout = httpx.Timeout(
        settings.GATEWAY_UPSTREAM_TIMEOUT_S, connect=settings.GATEWAY_CONNECT_TIMEOUT_S
    )
    # trust_env=False: engines are on the cluster network, not behind a proxy.
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        try:
            async with client.stream(
                "POST",
                f"{base_url}/v1/chat/completions",
                json=body,
                headers=headers,  # the engine's API key (console.engine_auth)
            ) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")[:500]
                    raise UpstreamError(
                        f"engine answered {response.status_code}: {text}"
                    )
                async for event in sse_events(response.aiter_bytes()):
                    data = sse_data(event)
                    if data == "[DONE]":
                        return
                    if isinstance(data, dict):
                        yield data
        except httpx.HTTPError as exc:
            raise UpstreamError(
                f"engine unreachable at {base_url}: {exc.__class__.__name__}"
            ) from exc
