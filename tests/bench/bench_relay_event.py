"""The CPU one relayed stream event costs in Python: the gateway's push path against
the bare relay's (tests/bench/relay_floor.py), side by side in one process, no
sockets.

    .venv/bin/python tests/bench/bench_relay_event.py [--events 20000] [--turns 5]

What runs, per event, as in the gateway: the engine connection's ``data_received``
(the chunked HTTP frame parsed by httptools), the push relay (``PushRelay._take``:
whole events, the count, the end marker), the ASGI app's write and uvicorn's
``RequestResponseCycle`` (the real class the gateway is served with, its chunked
framing and flow-control checks). The bare relay: httptools and one formatted write.
Both write into a transport that only counts bytes, so the socket's own cost (the
same for any relay: bench_gateway.py measures it) is left out.

``--send`` runs the gateway's write through uvicorn's ASGI ``send`` coroutine, the
way it went before the direct writer (console.gateway.app._PushedWriter), to show
what that writer saves. bench_gateway.py's CPU per request moves ±10 % between runs on
this machine; this measure moves a few per cent, so small changes to the hot path
show here first.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time

import _env  # noqa: F401  (environment, Redis, database)
import httptools
import uvloop
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from console.gateway import routing, upstream
from console.gateway.app import _PushedWriter
from console.gateway.relay import Call, PushRelay
from console.gateway.snapshot import KeyInfo

EVENT = (
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
    '"model":"qwen3.5","choices":[{"index":0,"delta":{"content":"你"},'
    '"logprobs":null,"finish_reason":null}]}\n\n'
).encode()
FRAME = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


class CountingTransport:
    """Where the relays write: counts the bytes, nothing more."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _cycle(transport: CountingTransport) -> RequestResponseCycle:
    """uvicorn's cycle for one request whose chunked head has gone out."""
    cycle = RequestResponseCycle(
        {"type": "http", "method": "POST"},  # type: ignore[typeddict-item]
        transport,  # type: ignore[arg-type]
        FlowControl(transport),  # type: ignore[arg-type]
        logging.getLogger("bench"),
        logging.getLogger("bench"),
        False,
        [],
        asyncio.Event(),
        False,
        True,
        lambda: None,
    )
    cycle.response_started, cycle.chunked_encoding = True, True
    return cycle


async def gateway_us(events: int, through_send: bool) -> float:
    """µs of process CPU per event through the gateway's push path."""
    loop = asyncio.get_running_loop()
    conn = upstream._Connection(loop)
    conn.transport = CountingTransport()  # type: ignore[assignment]
    conn.data_received(HEAD)
    resp = upstream.UpstreamResponse(conn, None, ("bench", 0))  # type: ignore[arg-type]
    engine = routing.Upstream(1, "bench", "http://127.0.0.1:1", "0.33.0")
    key = KeyInfo(pk=1, name="bench", prefix="bench", rpm=0, tpm=0)
    call = Call(key, "qwen3.5", engine, {"model": "qwen3.5", "stream": True}, 10)
    client = CountingTransport()
    cycle = _cycle(client)
    # the gateway's writer after the head went out; a send that is not uvicorn's
    # own bound method (a wrapper) gets every chunk through it
    send = (lambda message: cycle.send(message)) if through_send else cycle.send
    writer = _PushedWriter(send, None)

    push = PushRelay(call, resp, drop_usage_chunk=True)
    push._write, push._wake = writer.write, loop.create_future()
    resp.on_data(push._pump, push._take)
    start = time.process_time()
    for _ in range(events):
        conn.data_received(FRAME)
    spent = time.process_time() - start
    assert client.written >= events * len(EVENT), "the relay wrote less than it read"
    assert call.events == events
    return spent / events * 1e6


class _FloorUpstream:
    """relay_floor.py's engine side: parse, frame, write."""

    def __init__(self, client: CountingTransport) -> None:
        self.client = client
        self.parser = httptools.HttpResponseParser(self)

    def on_body(self, body: bytes) -> None:
        self.client.write(b"%x\r\n%s\r\n" % (len(body), body))


def floor_us(events: int) -> float:
    client = CountingTransport()
    floor = _FloorUpstream(client)
    floor.parser.feed_data(HEAD)
    start = time.process_time()
    for _ in range(events):
        floor.parser.feed_data(FRAME)
    spent = time.process_time() - start
    assert client.written >= events * len(EVENT)
    return spent / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20000, help="events per turn")
    parser.add_argument("--turns", type=int, default=5, help="turns, each side by side")
    parser.add_argument(
        "--send",
        action="store_true",
        help="write through uvicorn's ASGI send (no direct writer), for comparison",
    )
    args = parser.parse_args()
    gateway, floor = [], []
    for _ in range(args.turns):
        gateway.append(uvloop.run(gateway_us(args.events, args.send)))
        floor.append(floor_us(args.events))
    g, f = statistics.median(gateway), statistics.median(floor)
    print(
        f"µs of CPU per relayed event (median of {args.turns} turns of "
        f"{args.events}): gateway {g:.2f} ({' '.join(f'{x:.2f}' for x in gateway)})"
        f", bare relay {f:.2f} ({' '.join(f'{x:.2f}' for x in floor)}), "
        f"ratio {g / f:.1f}"
    )


if __name__ == "__main__":
    main()
