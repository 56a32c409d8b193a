"""Requests in flight per cluster, shared between the web worker processes.

With ``WEB_CONCURRENCY`` > 1 (uvicorn ``--workers``) each process publishes its own
counts to Redis every ``PUBLISH_S`` and reads the others' in the same round trip (one
Lua script); least-outstanding routing adds the others' last published counts to its
own live ones. A process that dies stops refreshing and drops out after ``TTL_MS``.
With one process nothing is published: its own counts are the whole truth.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable

import redis
import redis.asyncio as aioredis

log = logging.getLogger(__name__)

PUBLISH_S = 0.1
TTL_MS = 3000
PROCS_KEY = "gw:out:procs"

_EXCHANGE = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]))
local mine = 'gw:out:' .. ARGV[1]
redis.call('DEL', mine)
if #ARGV > 3 then redis.call('HSET', mine, unpack(ARGV, 4)) end
redis.call('PEXPIRE', mine, ARGV[3])
local out = {}
for _, p in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if p ~= ARGV[1] then
    local h = redis.call('HGETALL', 'gw:out:' .. p)
    for i = 1, #h do out[#out + 1] = h[i] end
  end
end
return out
"""

_others: dict[int, int] = {}


def enabled() -> bool:
    """Several worker processes serve /v1 (uvicorn reads the same variable)."""
    try:
        return int(os.environ.get("WEB_CONCURRENCY", "1")) > 1
    except ValueError:
        return False


def others(cluster_id: int) -> int:
    """Requests in flight to ``cluster_id`` from the other processes (last published)."""
    return _others.get(cluster_id, 0)


async def exchange(client: aioredis.Redis, mine: dict[int, int]) -> dict[int, int]:
    """Publish this process's counts; return the other live processes' summed."""
    proc = f"{socket.gethostname()}:{os.getpid()}"
    args: list[str | int] = [proc, int(time.time() * 1000), TTL_MS]
    for cluster_id, count in mine.items():
        args += [cluster_id, count]
    raw = await client.eval(_EXCHANGE, 1, PROCS_KEY, *args)
    summed: dict[int, int] = {}
    for i in range(0, len(raw), 2):
        cluster_id = int(raw[i])
        summed[cluster_id] = summed.get(cluster_id, 0) + int(raw[i + 1])
    return summed


async def run(
    client_for: Callable[[], aioredis.Redis], mine: Callable[[], dict[int, int]]
) -> None:
    """Exchange counts every PUBLISH_S for as long as the event loop runs."""
    global _others
    while True:
        try:
            _others = await exchange(client_for(), mine())
        except redis.RedisError as exc:
            log.warning("could not share gateway load with other processes: %s", exc)
        await asyncio.sleep(PUBLISH_S)
