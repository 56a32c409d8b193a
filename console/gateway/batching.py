"""The gateway's Redis scripts, sent together: every call made while one round trip
is on the wire goes in the next pipeline, so a burst of requests costs one round trip
rather than one each (group commit).

Why: each redis-py call costs a connection checkout, a command packing and a parse on
the event loop's one thread. When 16 streams end in the same engine step and their
clients all send the next request at once, 16 admissions (and 16 usage counts)
queued one round trip each put the last request ~16 round trips behind the first.
With a pipeline per round trip the burst pays one checkout and one write, and the
first request waits for at most the round trip already in flight.

Scripts go as EVAL with their text (redis.io/docs "Scripting with Lua": the server
keeps what EVAL ran in its script cache, EVALSHA only names it), so a Redis restarted
or flushed between calls needs no reload step, and a round trip needs no SCRIPT
EXISTS first (redis-py 8.1, redis/asyncio/client.py ``Pipeline.execute`` calls
``load_scripts`` -- one SCRIPT EXISTS -- whenever a ``Script`` was queued).

A batcher owns one connection made by the client's pool (same address, database,
credentials and TLS; redis-py's handshake on connect) and then takes its socket over:
each round trip's commands go out in one write, and the replies are parsed by hiredis
(the C parser redis-py itself uses) in the connection's callback, as they arrive. Not
redis-py's read path: a ``read_response`` per reply through its StreamReader, its
parser wrapper and its timeout handling cost ~40 us of a ~90 us round trip of one
EVAL here (4,000 sequential admissions, process CPU: 89-98 us with redis-py's
connection, 52-57 us with the socket's own callback and hiredis); a request makes
two (its admission and its usage).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import hiredis
import redis
import redis.asyncio as aioredis

Waiter = tuple[bytes, asyncio.Future[Any]]  # a packed EVAL and its caller's future


class _Replies(asyncio.Protocol):
    """The batcher's socket: replies parsed as they arrive; a round trip's worth goes
    to the batcher (one round trip is in flight at a time). An error reply is a
    redis.ResponseError in its call's place."""

    def __init__(self, writer: asyncio.StreamWriter, owner: Batcher) -> None:
        # the stream writer is kept: collected, it would close the socket (Python
        # 3.11's StreamWriter.__del__)
        self.writer = writer
        self.transport: Any = writer.transport
        self.owner = owner
        self.parser = hiredis.Reader(
            protocolError=redis.InvalidResponse, replyError=redis.ResponseError
        )
        self.lost: Exception | None = None
        self.expected = 0
        self.replies: list[Any] = []

    def send(self, packed: bytes, count: int) -> None:
        self.expected, self.replies = count, []
        self.transport.write(packed)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed(data)
            while (reply := self.parser.gets()) is not False:
                self.replies.append(reply)
        except redis.InvalidResponse as exc:  # not RESP: nothing more can be trusted
            self.fail(exc)
            return
        if len(self.replies) > self.expected:  # more than asked: not a Redis we know
            self.fail(redis.InvalidResponse("Redis sent a reply nobody asked for"))
        elif self.expected and len(self.replies) == self.expected:
            replies, self.replies, self.expected = self.replies, [], 0
            self.owner.answered(replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(
            redis.ConnectionError(f"Redis closed the connection ({exc or 'EOF'})")
        )

    def fail(self, exc: Exception) -> None:
        """The connection is done for: the round trip in flight gets ``exc``."""
        if self.lost is not None:
            return
        self.lost = exc
        self.transport.close()
        if self.expected:
            self.expected = 0
            self.owner.failed(exc, answered=bool(self.replies))


class Batcher:
    """One client's queue of script calls, sent a round trip at a time from the event
    loop's callbacks (a redis.asyncio client belongs to one event loop): calls made
    while a round trip is on the wire go out together when its replies are in; the
    first call after a quiet spell goes out on the next turn of the loop, with every
    call made in this one."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: _Replies | None = None
        self._timeout = 5.0
        self._queue: list[Waiter] = []
        self._flight: list[Waiter] = []
        self._timer: asyncio.TimerHandle | None = None
        self._scheduled = False
        self._held: asyncio.TimerHandle | None = None  # calls with a hold waiting
        self._resent = False  # the batch in flight is one sent again
        self._resend = False  # the next batch is one to send again
        self._closed = False
        # the loop keeps only a weak reference to a task (asyncio docs, create_task)
        self._connecting: asyncio.Task[None] | None = None

    def call(
        self, script: str, keys: list[str], args: list[Any], *, hold: float = 0.0
    ) -> asyncio.Future[Any]:
        """Queue one EVAL; the future gets its reply (or its error). Packed here, so
        an argument that cannot be sent fails its own caller (TypeError), not the
        round trip it would have gone in. With ``hold`` (seconds), a call made on a
        quiet connection waits that long for company: it goes out with the next call
        made without one, or with the next round trip's, or alone when the time is
        up; in every case in the order it was made."""
        packed = pack_eval(script, keys, args)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append((packed, future))
        if not (self._flight or self._scheduled or self._connecting):
            if not hold:
                self._scheduled = True
                loop.call_soon(self._flush)
            elif self._held is None:
                self._held = loop.call_later(hold, self._release)
        return future

    def _release(self) -> None:
        self._held = None
        if not self._scheduled:
            self._flush()

    async def drain(self) -> None:
        """Send what is held now and wait for every call queued or on the wire."""
        waiting = [future for _, future in self._queue + self._flight]
        if self._held is not None:
            self._held.cancel()
            self._release()
        if waiting:
            await asyncio.wait(waiting, timeout=self._timeout)

    def _flush(self) -> None:
        self._scheduled = False
        if self._held is not None and self._queue and not self._flight:
            self._held.cancel()  # what it held goes out now
            self._held = None
        if self._flight or self._connecting or not self._queue or self._closed:
            return
        conn = self._conn
        if conn is None or conn.lost is not None:
            assert self._loop is not None
            self._connecting = self._loop.create_task(self._reconnect())
            return
        batch, self._queue = self._queue, []
        self._flight, self._resent, self._resend = batch, self._resend, False
        conn.send(b"".join(packed for packed, _ in batch), len(batch))
        assert self._loop is not None
        self._timer = self._loop.call_later(self._timeout, self._expire, conn)

    def _expire(self, conn: _Replies) -> None:
        conn.fail(
            redis.TimeoutError(f"Redis did not answer within {self._timeout:g} s")
        )

    def answered(self, replies: list[Any]) -> None:
        """The round trip's replies, in its calls' order."""
        batch, self._flight = self._flight, []
        if self._timer is not None:
            self._timer.cancel()
        for (_, future), reply in zip(batch, replies, strict=True):
            if future.done():  # its caller left (client disconnected)
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)
        self._flush()

    def failed(self, exc: Exception, *, answered: bool) -> None:
        """The connection failed with a round trip in flight."""
        batch, self._flight = self._flight, []
        if self._timer is not None:
            self._timer.cancel()
        retry = isinstance(exc, redis.ConnectionError) and not answered
        if retry and not self._resent and not self._closed:
            # A connection dropped while idle (Redis restarted): no reply came,
            # nothing of the batch ran; once more on a new connection.
            self._queue[:0] = batch
            self._resend = True
            self._flush()
            return
        _fail(batch, exc)
        self._flush()

    async def _reconnect(self) -> None:
        try:
            self._conn = await self._connect()
        except Exception as exc:  # no connection: every call queued gets the error
            batch, self._queue = self._queue, []
            _fail(batch, exc)
        finally:
            self._connecting = None
        self._flush()

    async def _connect(self) -> _Replies:
        """A connection made and greeted by redis-py (AUTH, SELECT, TLS as the URL
        says), its socket then handed to a _Replies. redis-py 8.1 keeps the stream
        pair of a connected Connection in ``_reader``/``_writer`` (redis/asyncio/
        connection.py); they are cleared so that its clean-up leaves the socket be."""
        pool = self._client.connection_pool
        self._timeout = pool.connection_kwargs.get("socket_timeout") or 5.0
        # one timeout for connect and handshake, as for a round trip
        conn = pool.connection_class(
            **{**pool.connection_kwargs, "socket_timeout": None}
        )
        try:
            async with asyncio.timeout(self._timeout):
                await conn.connect()  # type: ignore[no-untyped-call]
        except TimeoutError:
            await conn.disconnect()
            raise redis.TimeoutError(
                f"Redis did not answer within {self._timeout:g} s"
            ) from None
        writer = conn._writer
        assert writer is not None
        conn._reader = conn._writer = None
        replies = _Replies(writer, self)
        writer.transport.set_protocol(replies)
        return replies

    async def close(self) -> None:
        """Close the connection; calls still waiting get a ConnectionError."""
        self._closed = True
        if self._held is not None:
            self._held.cancel()
            self._held = None
        if self._connecting is not None:
            self._connecting.cancel()
        if self._conn is not None:
            self._conn.fail(redis.ConnectionError("the batcher was closed"))
            self._conn = None
        batch, self._queue = self._queue, []
        _fail(batch, redis.ConnectionError("the batcher was closed"))


def _fail(batch: list[Waiter], exc: Exception) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)


_prefixes: dict[str, bytes] = {}


def pack_eval(script: str, keys: list[str], args: list[int | str]) -> bytes:
    """``EVAL script numkeys key... arg...`` in RESP, an array of bulk strings
    (redis.io/docs/latest/develop/reference/protocol-spec), the script's part packed
    once: redis-py's pack_command encodes every argument on every call, the ~300-byte
    script included (~30 us a call here; this is a few)."""
    prefix = _prefixes.get(script)
    if prefix is None:
        text = script.encode()
        prefix = _prefixes[script] = b"$4\r\nEVAL\r\n$%d\r\n%s\r\n" % (len(text), text)
    parts = [b"*%d\r\n" % (3 + len(keys) + len(args)), prefix]
    for item in (len(keys), *keys, *args):
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise TypeError(f"a script argument must be int or str, not {item!r}")
        data = item.encode() if isinstance(item, str) else b"%d" % item
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


_batchers: weakref.WeakKeyDictionary[aioredis.Redis, Batcher] = (
    weakref.WeakKeyDictionary()
)


async def close(client: aioredis.Redis) -> None:
    """Close the connection of ``client``'s batcher (the client is being closed)."""
    batcher = _batchers.pop(client, None)
    if batcher is not None:
        await batcher.close()


def script_future(
    client: aioredis.Redis,
    script: str,
    keys: list[str],
    args: list[Any],
    *,
    hold: float = 0.0,
) -> asyncio.Future[Any]:
    """EVAL ``script`` in ``client``'s next pipeline; the future of its reply
    (``hold``: Batcher.call)."""
    batcher = _batchers.get(client)
    if batcher is None:
        batcher = _batchers[client] = Batcher(client)
    return batcher.call(script, keys, args, hold=hold)


async def drain(client: aioredis.Redis) -> None:
    """Send what ``client``'s batcher holds and wait for its replies (shutdown)."""
    batcher = _batchers.get(client)
    if batcher is not None:
        await batcher.drain()


async def run_script(
    client: aioredis.Redis, script: str, keys: list[str], args: list[Any]
) -> Any:
    """EVAL ``script`` in ``client``'s next pipeline; its reply."""
    return await script_future(client, script, keys, args)
