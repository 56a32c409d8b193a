"""Redis calls made together share one round trip (console.gateway.batching), against
the real Redis the gateway uses: every caller gets its own reply, an error reaches
only its caller, an unreachable Redis reaches every caller."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.test import override_settings

from console.gateway import ratelimit
from console.gateway.admission import admit_or_503
from console.gateway.batching import run_script
from console.gateway.errors import GatewayError

INCR = "return redis.call('INCR', KEYS[1])"


async def _burst(bucket: str, count: int) -> tuple[list[int], int]:
    """``count`` admissions at once: their request counts and the connections the
    loop's client opened for them."""
    try:
        got = await asyncio.gather(*(ratelimit.admit(bucket) for _ in range(count)))
        pool = ratelimit._redis().connection_pool
        opened = len(pool._available_connections) + len(pool._in_use_connections)
        return [a.requests for a in got], opened
    finally:
        await ratelimit.redis_close()


def test_a_burst_of_admissions_goes_in_one_round_trip() -> None:
    bucket = f"batch-{uuid.uuid4().hex[:8]}"
    counts, opened = asyncio.run(_burst(bucket, 20))
    # each request counted once, in order, over one connection (one call each would
    # have checked out 20 connections, all in flight together)
    assert sorted(counts) == list(range(1, 21))
    assert opened == 1


async def _mixed(good: str, bad: str) -> list[object]:
    client = ratelimit._redis()
    try:
        got: list[object] = await asyncio.gather(
            run_script(client, INCR, [good], []),
            run_script(client, INCR, [bad], []),
            run_script(client, INCR, [good], []),
            return_exceptions=True,
        )
        return got
    finally:
        await ratelimit.redis_close()


def test_an_error_reaches_only_its_own_caller() -> None:
    good, bad = f"batch-ok-{uuid.uuid4().hex[:8]}", f"batch-bad-{uuid.uuid4().hex[:8]}"
    sync = redis.Redis.from_url(str(settings.REDIS_URL))
    sync.set(bad, "not a number")
    try:
        first, failed, second = asyncio.run(_mixed(good, bad))
    finally:
        sync.delete(good, bad)
    assert (first, second) == (1, 2)
    assert isinstance(failed, redis.ResponseError)


async def _unreachable(count: int) -> list[object]:
    dead = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)

    async def admit() -> object:
        try:
            return await run_script(dead, INCR, ["x"], [])
        except redis.RedisError as exc:
            return exc

    try:
        return await asyncio.gather(*(admit() for _ in range(count)))
    finally:
        await dead.aclose()


def test_an_unreachable_redis_fails_every_caller_of_the_round_trip() -> None:
    got = asyncio.run(_unreachable(5))
    assert len(got) == 5
    assert all(isinstance(exc, redis.ConnectionError) for exc in got)


async def _refused_admission() -> GatewayError:
    try:
        with pytest.raises(GatewayError) as err:
            await admit_or_503("anything")
        return err.value
    finally:
        await ratelimit.redis_close()


def test_an_admission_without_redis_is_a_503_with_retry_after() -> None:
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        err = asyncio.run(_refused_admission())
    assert err.status == 503
    assert err.retry_after == 5


async def _left_early(bucket: str) -> list[int]:
    """One caller is cancelled while its round trip is in flight; the others get
    their replies."""
    try:
        calls = [asyncio.ensure_future(ratelimit.admit(bucket)) for _ in range(3)]
        await asyncio.sleep(0)
        calls[1].cancel()
        done = await asyncio.gather(*calls, return_exceptions=True)
        return [a.requests for a in done if isinstance(a, ratelimit.Admission)]
    finally:
        await ratelimit.redis_close()


def test_a_caller_that_leaves_does_not_stop_the_others() -> None:
    bucket = f"batch-{uuid.uuid4().hex[:8]}"
    assert len(asyncio.run(_left_early(bucket))) == 2
