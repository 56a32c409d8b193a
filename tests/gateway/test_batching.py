"""Redis calls made together share one round trip (console.gateway.batching), against
the real Redis the gateway uses: every caller gets its own reply, an error reaches
only its caller, an unreachable Redis reaches every caller."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.test import override_settings

from console.gateway import batching, ratelimit, usage
from console.gateway.admission import admit_or_503
from console.gateway.batching import run_script
from console.gateway.errors import GatewayError

INCR = "return redis.call('INCR', KEYS[1])"


def _connections_received() -> int:
    """Connections the Redis server has accepted since it started (with the one
    this asks on)."""
    sync = redis.Redis.from_url(str(settings.REDIS_URL))
    try:
        return int(sync.info("stats")["total_connections_received"])
    finally:
        sync.close()


async def _burst(bucket: str, count: int) -> list[int]:
    """``count`` admissions at once: their request counts."""
    try:
        got = await asyncio.gather(*(ratelimit.admit(bucket) for _ in range(count)))
        return [a.requests for a in got]
    finally:
        await ratelimit.redis_close()


def test_a_burst_of_admissions_goes_in_one_round_trip() -> None:
    bucket = f"batch-{uuid.uuid4().hex[:8]}"
    before = _connections_received()
    counts = asyncio.run(_burst(bucket, 20))
    opened = _connections_received() - before - 1  # less the second count's own
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


async def _calls(client: aioredis.Redis, count: int) -> list[object]:
    """``count`` calls at once: each one's reply, or the RedisError it got."""

    async def call() -> object:
        try:
            return await run_script(client, INCR, ["x"], [])
        except redis.RedisError as exc:
            return exc

    try:
        return await asyncio.gather(*(call() for _ in range(count)))
    finally:
        await batching.close(client)
        await client.aclose()


async def _unreachable(count: int) -> list[object]:
    dead = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    return await _calls(dead, count)


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


async def _across_a_dropped_connection(bucket: str) -> list[int]:
    """An admission, the batcher's connection dropped by the server (what a Redis
    restart does to it), then another admission."""
    try:
        first = await ratelimit.admit(bucket)
        conn = batching._batchers[ratelimit._redis()]._conn
        assert conn is not None
        host, port = conn.transport.get_extra_info("sockname")[:2]
        sync = redis.Redis.from_url(str(settings.REDIS_URL))
        assert sync.client_kill(f"{host}:{port}")
        sync.close()
        second = await ratelimit.admit(bucket)
        return [first.requests, second.requests]
    finally:
        await ratelimit.redis_close()


def test_a_connection_dropped_while_idle_is_replaced_without_an_error() -> None:
    # the batch that finds the connection gone is sent once more on a new one, and
    # counted once
    bucket = f"batch-{uuid.uuid4().hex[:8]}"
    assert asyncio.run(_across_a_dropped_connection(bucket)) == [1, 2]


async def _silent(count: int) -> list[object]:
    """Calls to a server that takes the connection and never answers (a hung Redis)."""

    async def swallow(reader: asyncio.StreamReader, writer: Any) -> None:
        while await reader.read(4096):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hung = aioredis.Redis.from_url(f"redis://127.0.0.1:{port}/0?socket_timeout=0.5")
    try:
        return await _calls(hung, count)
    finally:
        server.close()


async def _greets_then_hangs(count: int) -> list[object]:
    """A server that answers redis-py's handshake (+OK to each command) and then
    never answers a script: the round trip's own timeout, not the connect's."""

    async def greet(reader: asyncio.StreamReader, writer: Any) -> None:
        while data := await reader.read(4096):
            if b"EVAL" in data:
                continue
            commands = sum(1 for line in data.split(b"\r\n") if line[:1] == b"*")
            writer.write(b"+OK\r\n" * commands)

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hung = aioredis.Redis.from_url(f"redis://127.0.0.1:{port}/0?socket_timeout=0.5")
    try:
        return await asyncio.wait_for(_calls(hung, count), 10)
    finally:
        server.close()


@pytest.mark.parametrize(
    "server", [_silent, _greets_then_hangs], ids=["silent", "greets-then-hangs"]
)
def test_a_redis_that_does_not_answer_times_every_caller_out(server: Any) -> None:
    # the client's socket_timeout bounds the connect and handshake (silent) and a
    # round trip (greets, then never answers a script): never a wait for ever
    got = asyncio.run(server(3))
    assert all(isinstance(exc, redis.TimeoutError) for exc in got), got
    assert "within 0.5 s" in str(got[0])


def test_a_packed_eval_is_what_redis_py_sends_and_redis_runs_it() -> None:
    keys, args = ["gw:k:ключ", "gw:k:2"], [7, "模型/a b", -3]
    conn = aioredis.Redis.from_url(str(settings.REDIS_URL)).connection_pool
    reference = b"".join(
        conn.connection_class(**conn.connection_kwargs).pack_command(
            "EVAL", INCR, len(keys), *keys, *args
        )
    )
    assert batching.pack_eval(INCR, keys, args) == reference
    with pytest.raises(TypeError, match="int or str"):
        batching.pack_eval(INCR, keys, [True])
    echo = "return {KEYS[1], ARGV[1], ARGV[2]}"

    async def run() -> Any:
        client = aioredis.Redis.from_url(str(settings.REDIS_URL))
        try:
            return await run_script(client, echo, ["gw:k:ключ"], ["模型", 42])
        finally:
            await batching.close(client)
            await client.aclose()

    assert asyncio.run(run()) == ["gw:k:ключ".encode(), "模型".encode(), b"42"]


async def _bad_argument_among_good(key: str) -> tuple[list[object], object]:
    client = aioredis.Redis.from_url(str(settings.REDIS_URL))
    try:
        got: list[object] = await asyncio.wait_for(
            asyncio.gather(
                run_script(client, INCR, [key], []),
                run_script(client, INCR, [key], [None]),
                run_script(client, INCR, [key], []),
                return_exceptions=True,
            ),
            5,
        )
        after = await asyncio.wait_for(run_script(client, INCR, [key], []), 5)
        return got, after
    finally:
        await batching.close(client)
        await client.aclose()


def test_an_argument_that_cannot_be_sent_fails_only_its_caller() -> None:
    # packed when called: the calls queued beside it go out and are answered, and
    # the batcher goes on (packed when sent, the error had left its round trip's
    # callers waiting for ever)
    got, after = asyncio.run(_bad_argument_among_good(f"batch-{uuid.uuid4().hex[:8]}"))
    assert got[0] == 1 and got[2] == 2, got
    assert isinstance(got[1], TypeError) and "int or str" in str(got[1])
    assert after == 3


async def _held_then_plain(key: str) -> tuple[int, int, bool]:
    """A call held for 30 s, then a call without a hold: both answered long before
    the hold is up, in the order they were made."""
    client = ratelimit._redis()
    try:
        held = batching.script_future(client, INCR, [key], [], hold=30.0)
        await asyncio.sleep(0.05)  # the held call sits in the queue meanwhile
        waited = not held.done()
        plain = await asyncio.wait_for(run_script(client, INCR, [key], []), 5)
        return await asyncio.wait_for(held, 5), plain, waited
    finally:
        await ratelimit.redis_close()


def test_a_held_call_goes_out_with_the_next_call_and_first() -> None:
    key = f"batch-held-{uuid.uuid4().hex[:8]}"
    try:
        held, plain, waited = asyncio.run(_held_then_plain(key))
    finally:
        redis.Redis.from_url(str(settings.REDIS_URL)).delete(key)
    assert waited  # not sent on its own before the hold was up
    assert (held, plain) == (1, 2)  # sent with the plain call, before it


async def _held_alone(key: str, hold: float) -> tuple[bool, int]:
    client = ratelimit._redis()
    try:
        held = batching.script_future(client, INCR, [key], [], hold=hold)
        await asyncio.sleep(hold / 2)
        early = held.done()
        return early, await asyncio.wait_for(held, 5)
    finally:
        await ratelimit.redis_close()


def test_a_held_call_with_no_company_goes_out_when_its_hold_is_up() -> None:
    key = f"batch-alone-{uuid.uuid4().hex[:8]}"
    try:
        early, reply = asyncio.run(_held_alone(key, 0.2))
    finally:
        redis.Redis.from_url(str(settings.REDIS_URL)).delete(key)
    assert not early and reply == 1


async def _held_then_closed(key: str) -> int:
    """The loop's client closed while a call waits out a 30 s hold (a loop that
    ends after one request): the call goes out and is answered, not dropped."""
    client = ratelimit._redis()
    held = batching.script_future(client, INCR, [key], [], hold=30.0)
    await asyncio.wait_for(ratelimit.redis_close(), 5)
    return await held


def test_closing_the_client_sends_what_it_holds() -> None:
    key = f"batch-closed-{uuid.uuid4().hex[:8]}"
    sync = redis.Redis.from_url(str(settings.REDIS_URL))
    try:
        assert asyncio.run(_held_then_closed(key)) == 1
        assert int(sync.get(key) or 0) == 1
    finally:
        sync.delete(key)


async def _spent_then_admitted(bucket: str, model: str) -> int:
    """A finished request's tokens (held for company) and the key's next admission
    right after: the admission counts them."""
    try:
        ratelimit.spend(bucket=bucket, key_id=0, model=model, prompt=30, completion=12)
        return (await ratelimit.admit(bucket)).tokens
    finally:
        await ratelimit.redis_close()


def test_the_next_admission_sees_the_tokens_just_spent() -> None:
    bucket = f"batch-spend-{uuid.uuid4().hex[:8]}"
    model = f"m-{bucket}"  # its usage fields, removed after: no key has id 0
    try:
        with override_settings(GATEWAY_USAGE_FLUSH_S=5):  # no flush of key 0's usage
            assert asyncio.run(_spent_then_admitted(bucket, model)) == 42
    finally:
        prefix = usage.field_prefix(0, model)
        redis.Redis.from_url(str(settings.REDIS_URL)).hdel(
            usage.PENDING_KEY, *(prefix + kind for kind in "rpc")
        )
