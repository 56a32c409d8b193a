"""Server-sent events: split a byte stream into whole events as they arrive, and read
their JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson


async def sse_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Yield each complete event (ending in a blank line) as soon as its last byte
    arrives."""
    buf = b""
    async for chunk in chunks:
        buf += chunk.replace(b"\r\n", b"\n")
        while (end := buf.find(b"\n\n")) != -1:
            event, buf = buf[: end + 2], buf[end + 2 :]
            yield event
    if buf.strip():
        yield buf + b"\n\n"


def sse_data(event: bytes) -> Any:
    """The JSON of an event's ``data:`` line; the string "[DONE]" for OpenAI's end
    marker; None without data."""
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return "[DONE]"
            try:
                return orjson.loads(payload)
            except orjson.JSONDecodeError:
                return None
    return None


def sse_frame(event: str, data: dict[str, Any]) -> bytes:
    """An Anthropic-style frame: ``event: <type>`` then ``data: <json>``."""
    return b"event: %s\ndata: %s\n\n" % (event.encode(), orjson.dumps(data))
