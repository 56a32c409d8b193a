"""The HTTP/1.1 client to the engines: pooled keep-alive connections per event loop,
one write per request, the answer parsed by httptools (llhttp, the parser uvicorn
serves the gateway with) as it arrives, no retries of a request an engine may have
read.

Why not a general client: the engine hop is the gateway's hot path, and aiohttp's
ClientSession costs ~115 us of CPU per request where this costs ~12 (a local server
answering a four-event stream, both measured in one process on the 2-core machine:
about a fifth of the gateway's whole CPU per request). What a general client does
and this one needs: the parsing (httptools), a pool, a connect timeout and a read
timeout between chunks -- here one timer per request, not one per chunk.

Keep-alive: vLLM's API server (uvicorn) closes a connection idle for
``VLLM_HTTP_TIMEOUT_KEEP_ALIVE`` seconds, 5 by default (vllm/envs.py;
vllm/entrypoints/openai/api_server.py passes it as uvicorn's ``timeout_keep_alive``).
A request written just as the engine closes its end is lost without an answer, so a
connection idle for ``IDLE_S`` (half of that) is retired rather than reused, and a
request on a reused connection that closes before a single byte of answer is sent
once more on a new one: the engine had closed the connection before reading it.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import AsyncIterator, Callable

import httptools
from django.conf import settings

from console.gateway.ratelimit import redis_close

IDLE_S = 2.5
HIGH_WATER = 1 << 20  # bytes read ahead of a slow client before reading pauses
_HEADER_VALUE = re.compile(r"^[\x20-\x7e]*\Z")  # printable ASCII: no CR/LF/control


class UpstreamError(Exception):
    """An engine's connection failed or its answer was not HTTP."""


class Unreachable(UpstreamError):
    """The engine refused or timed out the connection: the request never reached it."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection and the answer being read on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.lost = False
        self.paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.buffered = 0
        self.received = 0
        self.headers_done = self.complete = self.until_close = False
        self.keep_alive = False
        self.error: Exception | None = None
        self.last_data = self.loop.time()
        # called instead of waking a reader (UpstreamResponse.on_data)
        self.on_data: Callable[[], None] | None = None
        # offered each piece of the body first; True: taken, not kept (on_data)
        self.sink: Callable[[bytes], bool] | None = None

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True
        self.until_close = (
            "content-length" not in self.headers
            and "chunked" not in self.headers.get("transfer-encoding", "").lower()
        )

    def on_body(self, body: bytes) -> None:
        sink = self.sink
        if sink is not None and not self.body and sink(body):
            return
        self.body.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        self.complete = True

    # -- asyncio protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_data = self.loop.time()
        self.received += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.error = UpstreamError(f"the engine's answer is not HTTP/1.1 ({exc})")
            self.close()
        if self.buffered > HIGH_WATER and not self.paused and self.transport:
            self.paused = True
            self.transport.pause_reading()
        # _wake, unless it would do nothing: a relay took every piece (on_data set,
        # nothing kept, not over), as for nearly every event of a stream
        if self.on_data is None or self.body or self.complete or self.error is not None:
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.headers_done and self.until_close and self.error is None:
            self.complete = True  # an answer without a length ends with the connection
        elif not self.complete and self.error is None:
            self.error = UpstreamError(
                "the engine closed the connection"
                + ("" if self.headers_done else " before answering")
            )
        self._wake()

    def _wake(self) -> None:
        on_data = self.on_data
        if on_data is not None:
            if self.body or self.complete or self.error is not None:
                on_data()
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the request
    def start(self, request: bytes, timeout: float | None) -> None:
        """Write one request and watch for a stall (no byte for ``timeout`` s)."""
        self._reset()
        assert self.transport is not None
        self.transport.write(request)
        if timeout:
            self._timer = self.loop.call_later(timeout, self._watch, timeout)

    def _watch(self, timeout: float) -> None:
        """One timer per request, moved on by the data that came meanwhile."""
        if self.complete or self.lost:
            self._timer = None
            return
        due = self.last_data + timeout
        if self.loop.time() < due:
            self._timer = self.loop.call_at(due, self._watch, timeout)
            return
        self._timer = None
        self.error = TimeoutError(f"the engine sent nothing for {timeout:g} s")
        self.close()
        self._wake()

    async def wait(self) -> None:
        """Until more of the answer (or its end, or an error) is here."""
        self._waiter = self.loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def take(self) -> bytes:
        """What has been read of the body since the last take."""
        body = self.body
        data = body[0] if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        if self.paused and self.transport is not None and not self.lost:
            self.paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        return (
            self.complete
            and not self.body
            and not self.lost
            and not self.until_close
            and self.keep_alive
        )

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class UpstreamResponse:
    """An engine's answer: status and headers now, the body as it arrives."""

    def __init__(self, conn: _Connection, pool: _Pool, key: tuple[str, int]) -> None:
        self._conn, self._pool, self._key = conn, pool, key
        self.status = conn.status
        self.headers = conn.headers  # lower-case names
        self._done = False

    def ready(self) -> bytes | None:
        """The body read since the last call (b"" when nothing new has come), None at
        its end. Raises TimeoutError or UpstreamError, once what came before is taken,
        when the engine stalled or broke off."""
        conn = self._conn
        if conn.body:
            return conn.take()
        if conn.complete:
            return None
        if conn.error is not None:
            raise conn.error
        return b""

    def on_data(
        self,
        callback: Callable[[], None] | None,
        sink: Callable[[bytes], bool] | None = None,
    ) -> None:
        """Call ``callback`` (in the connection's own callback, no task switch)
        whenever more of the answer, its end or an error is here; None: back to
        waking ``next_chunk``. ``sink`` is offered each piece of the body as the
        parser reads it, before it is kept for ``ready``: a piece it takes (returns
        True) is never kept (no list, no join, no call to ``callback`` for it)."""
        self._conn.on_data = callback
        self._conn.sink = sink

    async def next_chunk(self) -> bytes:
        """The body read since the last call (waiting for some); b"" at its end.
        Raises TimeoutError or UpstreamError when the engine stalls or breaks off."""
        while True:
            data = self.ready()
            if data is None:
                return b""
            if data:
                return data
            await self._conn.wait()

    async def chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self.next_chunk():
            yield chunk

    async def read(self) -> bytes:
        parts = [chunk async for chunk in self.chunks()]
        return b"".join(parts)

    def at_eof(self) -> bool:
        return self._conn.complete and not self._conn.body

    def release(self) -> None:
        """Hand the connection back to the pool when the answer was read whole (else
        close it)."""
        if self._done:
            return
        self._done = True
        conn = self._conn
        if conn.reusable():
            if conn._timer is not None:
                conn._timer.cancel()
                conn._timer = None
            self._pool.put(self._key, conn)
        else:
            conn.close()

    def close(self) -> None:
        """Drop the connection (mid-answer: the engine sees the client leave and
        aborts the request)."""
        if not self._done:
            self._done = True
            self._conn.close()


class _Pool:
    """Idle connections by (host, port), newest last."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.idle: dict[tuple[str, int], list[_Connection]] = {}

    def put(self, key: tuple[str, int], conn: _Connection) -> None:
        conn.idle_since = self.loop.time()
        self.idle.setdefault(key, []).append(conn)

    def take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self.idle.get(key)
        now = self.loop.time()
        while idle:
            conn = idle.pop()
            if not conn.lost and now - conn.idle_since < IDLE_S:
                return conn
            conn.close()
        return None

    async def connect(self, host: str, port: int) -> _Connection:
        try:
            _, conn = await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: _Connection(self.loop), host.strip("[]"), port
                ),
                settings.GATEWAY_CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError) as exc:
            raise Unreachable(
                f"cannot connect to {host}:{port} ({type(exc).__name__}: {exc})"
            ) from None
        return conn

    def close(self) -> None:
        for conns in self.idle.values():
            for conn in conns:
                conn.close()
        self.idle.clear()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = (
    weakref.WeakKeyDictionary()
)
_addresses: dict[str, tuple[str, int, bytes]] = {}


def _address(base_url: str) -> tuple[str, int, bytes]:
    """(host, port, Host header line) of ``http://host:port``."""
    found = _addresses.get(base_url)
    if found is None:
        hostport = base_url.removeprefix("http://").rstrip("/")
        host, _, port = hostport.rpartition(":")
        found = _addresses[base_url] = (host, int(port), f"{hostport}".encode())
    return found


def _head(path: str, host: bytes, size: int, headers: dict[str, str]) -> bytes:
    lines = [
        b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"
        % (path.encode("ascii"), host, size)
    ]
    for name, value in headers.items():
        if not _HEADER_VALUE.match(value):
            raise ValueError(f"header {name} carries a control character")
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    lines.append(b"\r\n")
    return b"".join(lines)


async def post(
    base_url: str, path: str, data: bytes, headers: dict[str, str]
) -> UpstreamResponse:
    """POST ``data`` to an engine; the answer once its status and headers are in.

    Raises Unreachable (no connection: the engine never saw the request), or
    UpstreamError / TimeoutError (the connection broke, or the engine sent nothing for
    GATEWAY_UPSTREAM_TIMEOUT_S)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool(loop)
    host, port, host_header = _address(base_url)
    key = (host, port)
    request = _head(path, host_header, len(data), headers) + data
    timeout = settings.GATEWAY_UPSTREAM_TIMEOUT_S
    conn = pool.take(key)
    reused = conn is not None
    for _ in range(2):
        if conn is None:
            conn = await pool.connect(host, port)
        try:
            conn.start(request, timeout)
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait()
        except UpstreamError:
            conn.close()
            if reused and conn.received == 0:
                # closed by the engine while idle, before it read the request
                conn, reused = None, False
                continue
            raise
        except BaseException:  # timed out or cancelled (the client left)
            conn.close()
            raise
        return UpstreamResponse(conn, pool, key)
    raise AssertionError("unreachable")


async def upstream_close() -> None:
    """Close the running loop's connections (a loop that ends after one request:
    Django's async-to-sync path for the test client)."""
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        pool.close()
    await redis_close()
