"""The relay the ASGI app runs (console.gateway.relay.PushRelay): events written from
the engine connection's callback, a write the client's flow control holds back
finished in the request's task, in order, with nothing lost or sent twice.

Real parts: an aiohttp engine writing the stream, uvicorn serving the gateway's ASGI
app in this process, a client socket that stops reading for a while, Redis (limits
and usage) and the test database (keys, routes).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from console.gateway import app as gateway_app_module
from console.gateway import routing, upstream
from console.gateway.relay import Call, PushRelay
from console.gateway.services import apikey_create
from console.gateway.snapshot import KeyInfo
from console.gateway.upstream_errors import TOTAL_KEY
from console.models import ClusterState, Node
from tests.factories import free_port, make_cluster, make_profile

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "push-model"


def _event(i: int, size: int = 0) -> bytes:
    delta = {"content": f"t{i} " + "x" * size}
    return f"data: {json.dumps({'choices': [{'delta': delta}]})}\n\n".encode()


USAGE = (
    b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 7}}\n\n'
)
DONE = b"data: [DONE]\n\n"


async def _engine(
    pieces: list[bytes], *, break_off: bool = False, port: int = 0, pause: float = 0
) -> tuple[web.AppRunner, int]:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in pieces:
            await resp.write(piece)
            await asyncio.sleep(pause)  # separate writes
        if break_off:
            assert request.transport is not None
            request.transport.close()  # mid-answer: no terminating chunk
            return resp
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = port or free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


def _call(port: int, cluster_id: int = 1) -> Call:
    engine = routing.Upstream(cluster_id, "push", f"http://127.0.0.1:{port}", "0.33.0")
    key = KeyInfo(pk=1, name="push", prefix="pushtest", rpm=0, tpm=0)
    call = Call(key, "m", engine, {"model": "m", "stream": True}, 10)
    call.streamed = True
    return call


async def _relayed(
    pieces: list[bytes],
    call_of: Callable[[int], Call],
    write: Any,
    *,
    openai: bool = True,
    **engine: Any,
) -> tuple[Call, bytes]:
    """The engine's ``pieces`` relayed by a PushRelay through ``write``: the call
    (``call_of(port)``) and what the relay held back to the end."""
    runner, port = await _engine(pieces, **engine)
    call = call_of(port)
    try:
        resp = await upstream.post(
            call.upstream.base_url, "/v1/chat/completions", b"{}", {}
        )
        relay = PushRelay(call, resp, drop_usage_chunk=True, openai=openai)
        final = await relay.run(write)
    finally:
        await upstream.upstream_close()
        await runner.cleanup()
    return call, final


def test_writes_that_wait_are_finished_in_order() -> None:
    events = [_event(i) for i in range(40)]

    async def scenario() -> tuple[list[bytes], Call, int]:
        got: list[bytes] = []
        waited = calls = 0

        async def later(data: bytes) -> None:
            await asyncio.sleep(0.002)  # the client's buffer drains meanwhile
            got.append(data)

        def write(data: bytes) -> Any:
            nonlocal waited, calls
            calls += 1
            if calls % 2:  # every other write has to wait
                waited += 1
                return later(data)
            got.append(data)
            return None

        pieces = [*events, USAGE, DONE]
        call, final = await _relayed(pieces, _call, write, pause=0.002)
        got.append(final)
        return got, call, waited

    got, call, waited = asyncio.run(scenario())
    assert waited > 3
    assert b"".join(got) == b"".join(events) + DONE  # in order, usage chunk dropped
    assert got[-1] == DONE  # held back until the request was counted
    assert call.complete and call.tokens() == (3, 7)


@pytest.mark.parametrize("openai", [True, False])
def test_what_follows_the_end_marker_stays_behind_it(openai: bool) -> None:
    # the end marker is held back until the request is counted; anything the engine
    # sends after it (a separate read) must not overtake it to the client
    stop = DONE if openai else b"event: message_stop\ndata: {}\n\n"
    after = _event(99)
    events = [_event(i) for i in range(3)]

    async def scenario() -> tuple[list[bytes], bytes]:
        written: list[bytes] = []
        pieces = [*events, stop, after]
        _, final = await _relayed(
            pieces, _call, written.append, openai=openai, pause=0.01
        )
        return written, final

    written, final = asyncio.run(scenario())
    assert b"".join(written) == b"".join(events)
    assert final == stop + after


def test_an_engine_that_breaks_off_ends_the_relay_counted_and_reported() -> None:
    import redis as redis_sync
    from django.conf import settings

    events = [_event(i) for i in range(5)]
    cluster_id = 987_654
    client = redis_sync.Redis.from_url(str(settings.REDIS_URL))
    before = int(client.hget(TOTAL_KEY, str(cluster_id)) or 0)

    async def scenario() -> tuple[list[bytes], Call]:
        got: list[bytes] = []
        call, final = await _relayed(
            events, lambda port: _call(port, cluster_id), got.append, break_off=True
        )
        got.append(final)
        return got, call

    got, call = asyncio.run(scenario())
    assert b"".join(got) == b"".join(events)
    assert call.broken and not call.complete and call.done
    assert call.tokens()[1] == 5  # what was relayed, no usage came
    assert int(client.hget(TOTAL_KEY, str(cluster_id)) or 0) == before + 1


def _dechunk(raw: bytes) -> bytes:
    """The body of a chunked HTTP/1.1 response (``raw`` from the status line on)."""
    _, _, rest = raw.partition(b"\r\n\r\n")
    body = b""
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return body
        body, rest = body + rest[:size], rest[size + 2 :]


def _serve_key_and_cluster(engine_port: int) -> str:
    """An API key and a running cluster whose head answers on ``engine_port``."""
    _, secret = apikey_create(name="push", user=None, rpm=1000, tpm=10**9)
    profile = make_profile(
        name="push profile", served_model_name=MODEL, vllm_version="0.33.0"
    )
    cluster = make_cluster(name="push", nodes=1, profile=profile)
    Node.objects.filter(cluster=cluster, rank=0).update(
        management_ip="127.0.0.1", api_port=engine_port
    )
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    return secret


async def _through_uvicorn(
    events: list[bytes], engine_port: int, secret: str, *, stall: float = 0
) -> bytes:
    """One streamed request to the gateway's ASGI app served by uvicorn (as in
    production: its httptools protocol), from a client that reads nothing for
    ``stall`` seconds; the raw answer."""
    import uvicorn

    runner, _ = await _engine([*events, USAGE, DONE], port=engine_port)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            gateway_app_module.gateway_app,
            host="127.0.0.1",
            port=port,
            lifespan="off",
            log_level="warning",
            http="httptools",
        )
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    body = json.dumps(
        {"model": MODEL, "messages": [], "max_tokens": 10, "stream": True}
    ).encode()
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
        b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (secret.encode(), len(body), body)
    )
    await writer.drain()
    await asyncio.sleep(stall)  # not reading: the gateway's writes back up
    raw = b""
    while not raw.endswith(b"\r\n0\r\n\r\n"):
        more = await asyncio.wait_for(reader.read(65536), 30)
        assert more, raw[-200:]
        raw += more
    writer.close()
    server.should_exit = True
    await serving
    await upstream.upstream_close()
    await runner.cleanup()
    return raw


def test_a_client_slower_than_the_engine_gets_every_event_once_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 600 events of ~16 KB: far over the client connection's write buffer, so
    # uvicorn's send has to wait for the client (ASGI flow control)
    events = [_event(i, 16000) for i in range(600)]
    resumed = 0
    resume = gateway_app_module._resume

    def counting(*args: Any) -> Any:
        nonlocal resumed
        resumed += 1
        return resume(*args)

    monkeypatch.setattr(gateway_app_module, "_resume", counting)
    engine_port = free_port()
    secret = _serve_key_and_cluster(engine_port)
    raw = asyncio.run(_through_uvicorn(events, engine_port, secret, stall=1.0))
    assert raw.startswith(b"HTTP/1.1 200")
    assert _dechunk(raw) == b"".join(events) + DONE  # once each, in order
    assert resumed > 0  # some writes did wait for the client


def test_under_uvicorn_events_are_written_straight_to_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the writer recognises uvicorn's send (a uvicorn that renamed its
    # RequestResponseCycle or its fields would fail here, not just run slower) and
    # frames each event as uvicorn would: the client reads a valid chunked body, and
    # all but the head and the first event went past send
    events = [_event(i) for i in range(50)]
    through_send: list[bytes] = []
    send_now = gateway_app_module._send_now

    def counting(send: Any, message: dict[str, Any]) -> Any:
        if message["type"] == "http.response.body":
            through_send.append(message["body"])
        return send_now(send, message)

    monkeypatch.setattr(gateway_app_module, "_send_now", counting)
    engine_port = free_port()
    secret = _serve_key_and_cluster(engine_port)
    raw = asyncio.run(_through_uvicorn(events, engine_port, secret))
    assert raw.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in raw.partition(b"\r\n\r\n")[0].lower()
    assert _dechunk(raw) == b"".join(events) + DONE
    sent = b"".join(through_send)
    assert b"".join(events).startswith(sent)
    assert sent.count(b"\n\n") <= len(events) // 2  # the rest went direct


def test_a_send_that_is_not_uvicorns_gets_every_chunk() -> None:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    writer = gateway_app_module._PushedWriter(send, None)
    assert writer.cycle is None
    assert writer.write(b"data: 1\n\n") is None  # this send finishes at once
    body = {"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True}
    assert messages == [body]
