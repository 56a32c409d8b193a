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
or flushed between calls needs no reload step, and a pipeline needs no SCRIPT EXISTS
round trip (redis-py 8.1, redis/asyncio/client.py ``Pipeline.execute`` calls
``load_scripts`` -- one SCRIPT EXISTS -- whenever a ``Script`` was queued).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis.asyncio as aioredis

Waiter = tuple[str, list[str], list[Any], asyncio.Future[Any]]


class Batcher:
    """One client's queue of script calls and the task that drains it (a
    redis.asyncio client belongs to one event loop)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
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
                pipe = self._client.pipeline(transaction=False)
                for script, keys, args, _ in batch:
                    pipe.eval(script, len(keys), *keys, *args)
                try:
                    replies = await pipe.execute(raise_on_error=False)
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


_batchers: weakref.WeakKeyDictionary[aioredis.Redis, Batcher] = (
    weakref.WeakKeyDictionary()
)


async def run_script(
    client: aioredis.Redis, script: str, keys: list[str], args: list[Any]
) -> Any:
    """EVAL ``script`` in ``client``'s next pipeline; its reply."""
    batcher = _batchers.get(client)
    if batcher is None:
        batcher = _batchers[client] = Batcher(client)
    return await batcher.call(script, keys, args)
