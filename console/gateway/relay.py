"""One proxied request's bookkeeping and the relay of an engine's stream: each read's
events go on to the client as they arrive, the tokens are counted (from the engine's
usage, or from what was streamed when the client hangs up first), and the engine's
connection is handed back or closed exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from console.gateway import ratelimit, routing, translate
from console.gateway.admission import positive_int
from console.gateway.snapshot import KeyInfo
from console.gateway.sse import sse_data, sse_events
from console.gateway.upstream import UpstreamError, UpstreamResponse
from console.gateway.upstream_errors import upstream_error

log = logging.getLogger(__name__)


class Call:
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
        n: int = body["n"] if positive_int(body.get("n")) else 1
        limit: Any = body.get("max_completion_tokens") or body.get("max_tokens")
        self.most = n * int(limit) if positive_int(limit) else 0
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
        below what was relayed: the most the events streamed can carry (the first
        event one token, each later one up to the engine's --stream-interval), or the
        most the request could produce (n x max_tokens) when it was not streamed."""
        if self.streamed:
            prompt = self.usage.get("prompt_tokens") or self.prompt_estimate
            completion = self.usage.get("completion_tokens", 0)
            if self.complete and "completion_tokens" in self.usage:
                return prompt, completion
            relayed = (
                self.events and 1 + (self.events - 1) * self.upstream.stream_interval
            )
            if self.most:
                relayed = min(relayed, self.most)
            return prompt, max(completion, relayed)
        if "completion_tokens" in self.usage:
            return self.usage.get("prompt_tokens", 0), self.usage["completion_tokens"]
        return self.usage.get("prompt_tokens") or self.prompt_estimate, self.most

    async def finish(self, *, counted: bool = True) -> None:
        """Release the upstream slot, then count the request if it reached an engine
        (its count is sent, not waited for: ratelimit.spend)."""
        if self.done:
            return
        self.done = True
        routing.outstanding_leave(self.upstream)
        if not counted:
            return
        prompt, completion = self.tokens()
        future = ratelimit.spend(
            bucket=self.key.prefix,
            key_id=self.key.pk,
            model=self.model,
            prompt=prompt,
            completion=completion,
        )
        future.add_done_callback(self._counted)

    def _counted(self, future: asyncio.Future[Any]) -> None:
        exc = None if future.cancelled() else future.exception()
        if exc is not None:  # the answer is out; only its count is lost
            log.warning(
                "gateway could not count a request of %s: %s", self.key.name, exc
            )


async def _chunks(call: Call, resp: UpstreamResponse) -> AsyncIterator[bytes]:
    """The engine's body as it arrives; an engine that breaks off or stalls past
    GATEWAY_UPSTREAM_TIMEOUT_S ends it (and is counted for alerting)."""
    try:
        while chunk := await resp.next_chunk():
            yield chunk
    except (TimeoutError, UpstreamError):
        call.broken = True
        await upstream_error(call.upstream.cluster_id)


def is_last(chunk: bytes) -> bool:
    """The stream's end marker: OpenAI's ``data: [DONE]``, Anthropic's message_stop."""
    return chunk.endswith(b"[DONE]\n\n") or b"event: message_stop" in chunk[-80:]


class _Events:
    """Whole events out of the engine's reads. Little per-event work on the common
    path: a read that ends on an event boundary (an engine writes whole events) goes
    out as it came, after a count of its events; only the usage event (once per
    stream) is parsed, and dropped when the gateway asked for it and the client did
    not.

    Any read that ends in an empty line ends on an event boundary, whatever the line
    ends (LF, CRLF: the SSE spec allows both). Line ends matter only to the count:
    CRLF events hold no ``\n\n``. Whether the stream uses them is read off its first
    read (a server writes one kind: vLLM LF), not scanned for in every event."""

    def __init__(self, call: Call, drop_usage_chunk: bool) -> None:
        self.call, self.drop_usage_chunk = call, drop_usage_chunk
        self.rest = b""
        self.crlf: bool | None = None  # unknown until the first read

    def feed(self, chunk: bytes) -> bytes:
        """The whole events completed by ``chunk`` (b"" when none is)."""
        crlf = self.crlf
        if crlf is None:
            crlf = self.crlf = b"\r" in chunk
        if self.rest or crlf or not chunk.endswith(b"\n\n"):
            # part of an event (or CRLF line ends): keep what is not whole yet
            rest = (self.rest + chunk).replace(b"\r\n", b"\n")
            end = rest.rfind(b"\n\n")
            if end == -1:
                self.rest = rest
                return b""
            chunk, self.rest = rest[: end + 2], rest[end + 2 :]
        self.call.events += chunk.count(b"\n\n")
        if b'"usage"' in chunk:
            chunk = _take_usage(self.call, chunk, self.drop_usage_chunk)
        return chunk

    def tail(self) -> bytes:
        """What is left at the end of the stream, as a last event."""
        if not self.rest.strip():
            return b""
        self.call.events += 1
        return self.rest + b"\n\n"


async def relay(
    call: Call, resp: UpstreamResponse, *, drop_usage_chunk: bool
) -> AsyncIterator[bytes]:
    """Pass each read's whole events on as they arrive; closing this generator (client
    gone) closes the upstream stream. (The ASGI app relays through PushRelay; this is
    the same relay for a reader that pulls: the Django test client.)"""
    events = _Events(call, drop_usage_chunk)
    try:
        async for chunk in _chunks(call, resp):
            if out := events.feed(chunk):
                yield out
        if out := events.tail():
            yield out
        call.complete = not call.broken
    finally:
        await release(call, resp)


Write = Callable[[bytes], Coroutine[Any, Any, None] | None]


class PushRelay:
    """The relay driven by the engine connection's own callback: each piece of body
    the parser reads is handed to ``_take`` and its whole events are written to the
    client there, with no task switch, no generator and no buffer per event (a
    relayed event cost the gateway ~23 us more CPU through the task, the generators
    and back than written from the callback, and ~5 us more through a buffer and
    ASGI's send than straight: docs/gateway-performance.md;
    tests/bench/bench_relay_event.py). What arrives while a write waits is kept by
    the connection and written by ``_pump`` once it is done.

    The request's task sleeps until the answer ends, the engine breaks off, or the
    client's connection is over its write buffer (ASGI flow control: that write is
    finished in the task, the callback pauses until it is). The end marker and
    whatever follows it are held back and returned once the request is counted, so
    a client that sends its next request on ``[DONE]`` finds its tokens spent."""

    def __init__(
        self,
        call: Call,
        resp: UpstreamResponse,
        *,
        drop_usage_chunk: bool,
        openai: bool = True,
    ) -> None:
        self.call, self.resp = call, resp
        self.events = _Events(call, drop_usage_chunk)
        # OpenAI's stream ends in [DONE]: no need to look for Anthropic's end as well
        self.anthropic = not openai
        self.final: list[bytes] = []
        self._write: Write | None = None
        self._wake: asyncio.Future[None] | None = None
        self._held: Coroutine[Any, Any, None] | None = None
        self._failure: Exception | None = None

    async def run(self, write: Write) -> bytes:
        """Relay through ``write`` (None when written at once, else the rest of the
        write to await) until the answer ends; the held last bytes, after the request
        is counted."""
        loop = asyncio.get_running_loop()
        self._write = write
        try:
            while True:
                self._wake = loop.create_future()
                self.resp.on_data(self._pump, self._take)
                self._pump()
                await self._wake
                self.resp.on_data(None)
                if self._failure is not None:
                    raise self._failure
                if self._held is None:
                    break
                held, self._held = self._held, None
                await held
            if self.call.broken:
                await upstream_error(self.call.upstream.cluster_id)
            if tail := self.events.tail():
                self.final.append(tail)
            self.call.complete = not self.call.broken
        finally:
            self.resp.on_data(None)
            if self._held is not None:  # cancelled (the client left) before it ran
                self._held.close()
            await release(self.call, self.resp)
        return b"".join(self.final)

    def _take(self, data: bytes) -> bool:
        """A piece of the body, straight from the engine connection's parser: its
        whole events written now (True), or held back from the end marker on;
        unless the relay is not taking (a write is waiting, the answer is over):
        then the connection keeps it for ``_pump``. A write that has to wait wakes
        the task to finish it. One method, not three: this runs once per event."""
        wake = self._wake
        if wake is None or wake.done():
            return False
        try:
            out = self.events.feed(data)
            if not out:
                return True
            if (
                self.final
                or out.endswith(b"[DONE]\n\n")
                or (self.anthropic and is_last(out))
            ):
                self.final.append(out)
                return True
            held = self._write(out)  # type: ignore[misc]
            if held is not None:
                self._held = held
                wake.set_result(None)
        except Exception as exc:  # noqa: BLE001 (not in the engine connection's callback)
            self._failure = exc
            wake.set_result(None)
        return True

    def _pump(self) -> None:
        """Take what the connection kept and relay it; wake the task at the end, on
        an error, or when a write has to wait."""
        wake = self._wake
        if wake is None:
            return
        while not wake.done():
            try:
                data = self.resp.ready()
            except (TimeoutError, UpstreamError):
                self.call.broken = True
                data = None
            except Exception as exc:  # noqa: BLE001 (as in _take)
                self._failure = exc
                data = None
            if data is None:
                if not wake.done():
                    wake.set_result(None)
                return
            if not data:
                return  # more to come
            self._take(data)


def _take_usage(call: Call, chunk: bytes, drop_usage_chunk: bool) -> bytes:
    """Read the token counts from the events of ``chunk`` that carry usage; without
    the usage-only chunk the gateway asked for (``choices: []``) when the client did
    not."""
    kept = []
    for event in chunk[:-2].split(b"\n\n"):
        if b'"usage"' in event:
            data = sse_data(event)
            call.read_usage(data)
            if (
                drop_usage_chunk
                and isinstance(data, dict)
                and data.get("choices") == []
            ):
                continue
        kept.append(event + b"\n\n")
    return b"".join(kept)


async def _counted(call: Call, events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    async for event in events:
        call.events += 1
        yield event


async def relay_translated(call: Call, resp: UpstreamResponse) -> AsyncIterator[bytes]:
    try:
        async for frame in translate.chat_stream_to_messages(
            _counted(call, sse_events(_chunks(call, resp))), call.model, call.usage
        ):
            yield frame
        call.complete = not call.broken
    finally:
        await release(call, resp)


async def release(call: Call, resp: UpstreamResponse) -> None:
    """Hand the connection back (answer read whole) or close it, then count the
    request, even if closing fails.

    On a client disconnect, closing drops the engine's connection mid-answer, which
    the engine sees as an abort (vLLM frees the sequence's KV cache).
    """
    try:
        if resp.at_eof():
            resp.release()
        else:
            resp.close()
    finally:
        await call.finish()
