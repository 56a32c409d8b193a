"""The gateway's own request and response objects (the /v1 ASGI app speaks ASGI
directly; console.gateway.urls adapts them to Django for the test client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class Request:
    """One /v1 request: method, path, headers (lower-case names), whole body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamResponse:
    """Server-sent events relayed as they come; closing ``chunks`` (the client left)
    closes the engine's stream. With ``push`` (a console.gateway.relay.PushRelay of
    the same stream) the ASGI app relays through the engine connection's callback
    and ``chunks`` is never started; a reader that pulls (the Django test client)
    reads ``chunks``."""

    chunks: AsyncIterator[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(
        default_factory=lambda: {
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx must not buffer SSE
        }
    )
    push: Any = None


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        status,
        orjson.dumps(data),
        headers=headers or {},
    )
