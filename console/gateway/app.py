"""The /v1 gateway as a plain ASGI app, mounted in console.asgi beside Django.

Gateway requests carry an API key and need none of Django's request machinery: no
session, CSRF, middleware, URL resolver, ``request_started``/``request_finished``
signals (whose sync receivers each cost a hop to Django's one sync thread) or
spooled body. This app reads the body, calls console.gateway.views.dispatch and
writes the answer; a streamed answer is relayed chunk by chunk while a watcher
waits for the client's ``http.disconnect``, which cancels the relay (closing the
engine's stream, so vLLM aborts the request). Keys, limits and usage are the views'
business, exactly as before.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import Coroutine
from typing import Any

from django.conf import settings
from django.urls import get_resolver
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from console.gateway import peers, ratelimit, routing, usage
from console.gateway.errors import OPENAI, GatewayError, error_response
from console.gateway.http import Request, Response, StreamResponse
from console.gateway.relay import is_last
from console.gateway.views import dispatch

log = logging.getLogger(__name__)

GATEWAY_PREFIX = "/v1/"
_started: asyncio.AbstractEventLoop | None = None  # the loop last seen (one per server)
_background: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Any]] = (
    weakref.WeakKeyDictionary()
)


def _start_background() -> None:
    """Once per event loop: the usage flusher and, with several worker processes, the
    exchange of outstanding counts."""
    global _started
    loop = asyncio.get_running_loop()
    if loop is _started or loop in _background:
        return
    _started = loop
    tasks = [loop.create_task(usage.run())]
    if peers.enabled():
        tasks.append(
            loop.create_task(peers.run(ratelimit._redis, routing.outstanding_all))
        )
    _background[loop] = tasks


async def _read_body(receive: Any) -> bytes | None:
    """The whole body; None when the client left or it is over the size limit."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise GatewayError(
                413,
                f"The request body is over {limit} bytes "
                "(DATA_UPLOAD_MAX_MEMORY_SIZE); send a shorter prompt.",
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _head(status: int, content_type: str, headers: dict[str, str]) -> dict[str, Any]:
    raw = [(b"content-type", content_type.encode("latin-1"))]
    raw += [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
    ]
    return {"type": "http.response.start", "status": status, "headers": raw}


async def _send_plain(send: Any, response: Response) -> None:
    start = _head(response.status, response.content_type, response.headers)
    start["headers"].append((b"content-length", str(len(response.body)).encode()))
    await send(start)
    await send({"type": "http.response.body", "body": response.body})


def _send_now(send: Any, message: dict[str, Any]) -> Coroutine[Any, Any, None] | None:
    """ASGI ``send`` without a task switch: uvicorn's send writes at once unless the
    client's connection is over its write buffer's high-water mark (flow control);
    then what is left of it comes back, to be awaited."""
    coro = send(message)
    try:
        blocker = coro.send(None)
    except StopIteration:
        return None
    return _resume(coro, blocker)


async def _resume(coro: Any, blocker: Any) -> None:
    """Drive a send that waits to its end, the way a task would: resume it each time
    what it waits on is done."""
    try:
        while True:
            if blocker is None:  # a bare yield: one turn of the loop
                await asyncio.sleep(0)
            else:
                await asyncio.wait([blocker])
            blocker = coro.send(None)
    except StopIteration:
        pass
    finally:
        coro.close()


class _PushedWriter:
    """How PushRelay writes to the client: the response's head goes out with the
    first chunk through ASGI ``send``; each chunk after it is written the way
    uvicorn's httptools protocol writes a body chunk (chunked framing, one
    ``transport.write``: uvicorn/protocols/http/httptools_impl.py
    ``RequestResponseCycle.send``) without building its message and running its
    coroutine, about a quarter of the gateway's own Python per relayed event.

    Directly only under that protocol (the one the gateway is served with:
    pyproject pins ``uvicorn[standard]``, whose httptools it picks) and only while
    its send would write at once: the head went out with chunked framing, the
    answer is not complete, the client is connected and its write buffer is under
    the high-water mark (uvicorn's flow control). Otherwise the chunk goes through
    ``send``, and under another server (h11, a wrapping middleware) every chunk
    does. ``write`` returns None when written, else the rest of the send to await.
    """

    __slots__ = ("send", "head", "cycle")

    def __init__(self, send: Any, head: dict[str, Any] | None) -> None:
        self.send, self.head = send, head
        cycle = getattr(send, "__self__", None)
        self.cycle = cycle if type(cycle) is RequestResponseCycle else None

    def write(self, data: bytes) -> Coroutine[Any, Any, None] | None:
        cycle = self.cycle
        if self.head is None:
            if (
                cycle is not None
                and cycle.chunked_encoding
                and not cycle.flow.write_paused
                and not cycle.disconnected
                and not cycle.response_complete
            ):
                cycle.transport.write(b"%x\r\n%s\r\n" % (len(data), data))
                return None
            body = {"type": "http.response.body", "body": data, "more_body": True}
            return _send_now(self.send, body)
        start, self.head = self.head, None
        body = {"type": "http.response.body", "body": data, "more_body": True}
        held = _send_now(self.send, start)
        if held is not None:
            return _then(held, self.send, body)
        return _send_now(self.send, body)


async def _send_pushed(
    send: Any, response: StreamResponse, state: dict[str, bool]
) -> None:
    """Relay through the engine connection's callback (console.gateway.relay.
    PushRelay); the end marker goes out with the end of the body once counted."""
    writer = _PushedWriter(
        send, _head(response.status, response.content_type, response.headers)
    )
    final = await response.push.run(writer.write)
    if writer.head is not None:
        await send(writer.head)
    state["done"] = True
    await send({"type": "http.response.body", "body": final})


async def _then(
    held: Coroutine[Any, Any, None], send: Any, message: dict[str, Any]
) -> None:
    await held
    await send(message)


async def _send_stream(
    send: Any, response: StreamResponse, state: dict[str, bool]
) -> None:
    """Relay the chunks; the end marker goes out together with the end of the body
    (one write instead of two), after the relay has counted the request."""
    chunks = response.chunks
    head = _head(response.status, response.content_type, response.headers)
    try:
        pending: list[bytes] = []
        async for chunk in chunks:
            if head:
                await send(head)
                head = {}
            if not is_last(chunk):
                await send(
                    {"type": "http.response.body", "body": chunk, "more_body": True}
                )
                continue
            pending.append(chunk)
            async for (
                more
            ) in chunks:  # normally none: this runs the relay's bookkeeping
                pending.append(more)
            break
        if head:
            await send(head)
        state["done"] = True
        await send({"type": "http.response.body", "body": b"".join(pending)})
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]


class _Watch:
    """Cancel ``task`` when the client disconnects before the answer is complete
    (uvicorn also reports a disconnect once the response is complete: not ours).

    ASGI's ``receive`` is driven from the future it waits on, not by a task of its
    own: a task per request cost a creation, a first step and a cancelled step.
    """

    def __init__(
        self, receive: Any, task: asyncio.Task[Any], state: dict[str, bool]
    ) -> None:
        self.receive, self.task, self.state = receive, task, state
        self.coro: Any = None
        self._listen()

    def _listen(self) -> None:
        self.coro = self.receive()
        self._step()

    def _step(self, _: Any = None) -> None:
        coro = self.coro
        if coro is None:
            return
        try:
            blocker = coro.send(None)
        except StopIteration as end:
            self.coro = None
            if end.value["type"] != "http.disconnect":
                self._listen()  # not the message watched for: wait for the next
            elif not self.state["done"]:
                self.state["left"] = True
                self.task.cancel()
            return
        except BaseException:
            self.coro = None
            raise
        if blocker is None:  # a bare yield: once more on the next turn of the loop
            asyncio.get_running_loop().call_soon(self._step)
        else:
            blocker.add_done_callback(self._step)

    def close(self) -> None:
        coro, self.coro = self.coro, None
        if coro is not None:
            coro.close()  # uvicorn's wait on its event is dropped


async def gateway_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI entry for every ``/v1/`` HTTP request."""
    _start_background()
    try:
        body = await _read_body(receive)
    except GatewayError as err:
        await _send_plain(send, error_response(err, OPENAI))
        return
    if body is None:
        return  # the client left before sending its request
    headers = {
        k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
    }
    request = Request(scope["method"], scope["path"], headers, body)
    task = asyncio.current_task()
    assert task is not None
    state = {"done": False, "left": False}
    watcher = _Watch(receive, task, state)
    try:
        response = await dispatch(request)
        if isinstance(response, StreamResponse) and response.push is not None:
            await _send_pushed(send, response, state)
        elif isinstance(response, StreamResponse):
            await _send_stream(send, response, state)
        else:
            state["done"] = True
            await _send_plain(send, response)
    except asyncio.CancelledError:
        if not state["left"]:
            raise  # cancelled from outside (server shutdown): not ours to swallow
        task.uncancel()  # the client left; the relay is closed, the request counted
    except Exception:
        log.exception("gateway request %s %s failed", request.method, request.path)
        if not state["done"] and not state["left"]:
            try:
                await _send_plain(
                    send,
                    error_response(
                        GatewayError(500, "The gateway failed on this request."), OPENAI
                    ),
                )
            except Exception:  # the response had started already
                pass
    finally:
        watcher.close()


async def gateway_lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI lifespan: at shutdown, stop this process's background tasks and write the
    usage it still holds (a worker restarted by a deploy leaves nothing for the next
    flush of another process to find; with one process there is no other)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            # Everything the process loaded (Django, the apps, ~90,000 objects) goes
            # to the collector's permanent generation (Python docs, gc.freeze): a
            # full collection no longer walks it. Measured here: 52-57 ms per full
            # collection before, a pause of the event loop every few hundred
            # requests that every stream in flight waited out (the gateway's TTFT
            # p99 at 64 streams); after, what was made since startup. The URLconf
            # (every page's and the API's views) is loaded first: Django imports it
            # at the first page request, after the freeze, and its ~36,000 objects
            # then made each full collection 26-28 ms again (1.5-2.4 ms loaded
            # first; a fresh process, a page request, gc.collect timed).
            get_resolver().url_patterns  # noqa: B018  (imports the views)
            gc.freeze()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            global _started
            _started = None
            for task in _background.pop(asyncio.get_running_loop(), []):
                task.cancel()
            await ratelimit.drain()  # the counts of the last requests, if held
            await usage.flush_now()  # a failure leaves the counts in Redis
            await send({"type": "lifespan.shutdown.complete"})
            return
