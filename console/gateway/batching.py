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

Waiter = tuple[str, list[str], list[Any], asyncio.Future[Any]]


class _Replies(asyncio.Protocol):
    """The batcher's socket: replies parsed as they arrive and handed, a round
    trip's worth at a time, to the future waiting for them (one round trip is in
    flight at a time). An error reply is a redis.ResponseError in its call's place."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        # the stream writer is kept: collected, it would close the socket (Python
        # 3.11's StreamWriter.__del__)
        self.writer = writer
        self.transport: Any = writer.transport
        self.parser = hiredis.Reader(
            protocolError=redis.InvalidResponse, replyError=redis.ResponseError
        )
        self.lost: Exception | None = None
        self.expected = 0
        self.replies: list[Any] = []
        self.waiter: asyncio.Future[list[Any]] | None = None

    def expect(self, count: int, waiter: asyncio.Future[list[Any]]) -> None:
        self.expected, self.replies, self.waiter = count, [], waiter

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed(data)
            while (reply := self.parser.gets()) is not False:
                self.replies.append(reply)
        except redis.InvalidResponse as exc:  # not RESP: nothing more can be trusted
            self.fail(exc)
            return
        waiter = self.waiter
        if waiter is None:
            if self.replies:  # nothing was asked: not a Redis we know
                self.fail(redis.InvalidResponse("Redis sent a reply nobody asked for"))
            return
        if len(self.replies) >= self.expected:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(self.replies[: self.expected])

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(
            redis.ConnectionError(f"Redis closed the connection ({exc or 'EOF'})")
        )

    def fail(self, exc: Exception) -> None:
        """The connection is done for: its waiter gets ``exc``."""
        if self.lost is None:
            self.lost = exc
        self.transport.close()
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class Batcher:
    """One client's queue of script calls and the task that drains it (a
    redis.asyncio client belongs to one event loop)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._conn: _Replies | None = None
        self._timeout = 5.0
        self._queue: list[Waiter] = []
        # the loop keeps only a weak reference to a task (asyncio docs, create_task)
        self._task: asyncio.Task[None] | None = None

    def call(
        self, script: str, keys: list[str], args: list[Any]
    ) -> asyncio.Future[Any]:
        """Queue one EVAL; the future gets its reply (or its error)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append((script, keys, args, future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        batch: list[Waiter] = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    replies = await self._round_trip(batch)
                except Exception as exc:  # the connection: every call of it failed
                    replies = [exc] * len(batch)
                for (*_, future), reply in zip(batch, replies, strict=True):
                    if future.done():  # its caller left (client disconnected)
                        continue
                    if isinstance(reply, Exception):
                        future.set_exception(reply)
                    else:
                        future.set_result(reply)
                batch = []
        finally:
            for *_, future in batch + self._queue:  # cancelled mid-way (shutdown)
                future.cancel()
            self._queue = []

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
                await conn.connect()
        except TimeoutError:
            await conn.disconnect()
            raise self._timed_out() from None
        writer = conn._writer
        assert writer is not None
        conn._reader = conn._writer = None
        replies = _Replies(writer)
        writer.transport.set_protocol(replies)
        return replies

    async def _round_trip(self, batch: list[Waiter]) -> list[Any]:
        """Every call of ``batch`` in one write; their replies in order (an error
        reply in its call's place)."""
        packed = b"".join(
            pack_eval(script, keys, args) for script, keys, args, _ in batch
        )
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            conn = self._conn
            if conn is None or conn.lost is not None:
                conn = self._conn = await self._connect()
            waiter: asyncio.Future[list[Any]] = loop.create_future()
            conn.expect(len(batch), waiter)
            conn.transport.write(packed)
            timer = loop.call_later(
                self._timeout,
                conn.fail,
                self._timed_out(),
            )
            try:
                return await waiter
            except redis.ConnectionError:
                if conn.replies or attempt == 2:
                    raise
                # A connection dropped while idle (Redis restarted): no reply came,
                # nothing of the batch ran; once more on a new connection.
            except BaseException:  # cancelled (shutdown): replies may still come
                conn.fail(redis.ConnectionError("the round trip was abandoned"))
                raise
            finally:
                timer.cancel()
        raise AssertionError("unreachable")

    def _timed_out(self) -> redis.TimeoutError:
        return redis.TimeoutError(f"Redis did not answer within {self._timeout:g} s")

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.fail(redis.ConnectionError("closed"))
            self._conn = None


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


async def run_script(
    client: aioredis.Redis, script: str, keys: list[str], args: list[Any]
) -> Any:
    """EVAL ``script`` in ``client``'s next pipeline; its reply."""
    batcher = _batchers.get(client)
    if batcher is None:
        batcher = _batchers[client] = Batcher(client)
    return await batcher.call(script, keys, args)
