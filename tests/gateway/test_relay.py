"""The relay of an engine's event stream: whatever way the engine's writes cut the
events (mid-event, CRLF line ends, several events in one write), the client gets
every event whole, in order, and only whole events; the usage chunk the gateway asked
for is read and dropped; the tokens are counted from it.

A real aiohttp server writes the stream in the given pieces; the relay reads it
through the gateway's own engine client (console.gateway.upstream), as the gateway
does: pulled (the ``relay`` generator the Django adapter reads) and pushed (PushRelay,
what the ASGI app runs: events written from the engine connection's callback).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from console.gateway import routing, upstream
from console.gateway.relay import Call, PushRelay, relay
from console.gateway.snapshot import KeyInfo
from tests.factories import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def _event(data: object) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


ROLE = _event({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
TOKENS = [_event({"choices": [{"delta": {"content": f"t{i} "}}]}) for i in range(5)]
USAGE = _event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}})
DONE = b"data: [DONE]\n\n"
STREAM = ROLE + b"".join(TOKENS) + USAGE + DONE


@pytest.fixture(params=["pull", "push"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _relayed(
    pieces: list[bytes],
    *,
    mode: str,
    drop_usage_chunk: bool,
    stream_interval: int = 1,
    max_tokens: int = 5,
) -> tuple[list[bytes], Call]:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in pieces:
            await resp.write(piece)
            await asyncio.sleep(0.01)  # separate reads on the other side
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    engine = routing.Upstream(
        1,
        "relay",
        f"http://127.0.0.1:{port}",
        "0.33.0",
        stream_interval=stream_interval,
    )
    key = KeyInfo(pk=1, name="relay", prefix="relaytest", rpm=0, tpm=0)
    body = {"model": "m", "stream": True, "max_tokens": max_tokens}
    call = Call(key, "m", engine, body, 10)
    call.streamed = True
    got: list[bytes] = []
    try:
        resp = await upstream.post(engine.base_url, "/v1/chat/completions", b"{}", {})
        if mode == "pull":
            async for out in relay(call, resp, drop_usage_chunk=drop_usage_chunk):
                got.append(out)
        else:

            def write(data: bytes) -> None:
                got.append(data)

            push = PushRelay(call, resp, drop_usage_chunk=drop_usage_chunk)
            if final := await push.run(write):
                got.append(final)
    finally:
        await upstream.upstream_close()
        await runner.cleanup()
    return got, call


CUTS = {
    "one write per event": [ROLE, *TOKENS, USAGE, DONE],
    "all in one write": [STREAM],
    "cut mid-event": [STREAM[i : i + 7] for i in range(0, len(STREAM), 7)],
    "cut between the blank line's newlines": [
        ROLE[:-1],
        ROLE[-1:] + TOKENS[0],
        b"".join(TOKENS[1:]) + USAGE + DONE,
    ],
    "CRLF line ends": [
        STREAM.replace(b"\n", b"\r\n")[:50],
        STREAM.replace(b"\n", b"\r\n")[50:],
    ],
    # the relay reads the line ends off the first read: this one holds none yet
    "CRLF line ends, the first read before the first line end": [
        STREAM.replace(b"\n", b"\r\n")[:5],
        STREAM.replace(b"\n", b"\r\n")[5:],
    ],
}


@pytest.mark.parametrize("cut", CUTS, ids=list(CUTS))
def test_every_event_arrives_whole_and_in_order(cut: str, mode: str) -> None:
    got, call = asyncio.run(_relayed(CUTS[cut], mode=mode, drop_usage_chunk=True))
    assert all(out.endswith(b"\n\n") for out in got), got  # only whole events go out
    assert b"".join(got) == ROLE + b"".join(TOKENS) + DONE  # usage chunk dropped
    assert call.usage == {"prompt_tokens": 9, "completion_tokens": 5}
    assert call.complete and call.tokens() == (9, 5)


def test_the_usage_chunk_stays_when_the_client_asked_for_it(mode: str) -> None:
    got, call = asyncio.run(_relayed([STREAM], mode=mode, drop_usage_chunk=False))
    assert b"".join(got) == STREAM
    assert call.tokens() == (9, 5)


def test_a_stream_without_its_usage_counts_what_was_relayed(mode: str) -> None:
    got, call = asyncio.run(
        _relayed([ROLE, *TOKENS[:3]], mode=mode, drop_usage_chunk=True)
    )
    assert b"".join(got) == ROLE + b"".join(TOKENS[:3])
    # no usage from the engine: at least the events relayed (role + 3 tokens)
    assert call.tokens()[1] == 4


CRLF_CUTS = {
    "CRLF": [piece.replace(b"\n", b"\r\n") for piece in [ROLE, *TOKENS[:3]]],
    # a read that ends in "\n\n" but holds a CRLF event before it
    "CRLF then LF in one read": [
        ROLE.replace(b"\n", b"\r\n") + TOKENS[0],
        TOKENS[1],
        TOKENS[2],
    ],
}


@pytest.mark.parametrize("cut", CRLF_CUTS, ids=list(CRLF_CUTS))
def test_a_crlf_stream_without_its_usage_counts_every_event(
    cut: str, mode: str
) -> None:
    # CRLF events hold no "\n\n": counted only once their line ends are read
    got, call = asyncio.run(_relayed(CRLF_CUTS[cut], mode=mode, drop_usage_chunk=True))
    assert b"".join(got) == ROLE + b"".join(TOKENS[:3])
    assert call.tokens()[1] == 4
