"""The floor of a relay written in Python: uvloop, httptools on both sides, pooled
keep-alive connections to one engine, callbacks only (no task per request or per
event, no ASGI), each engine read written on to the client in the same callback, the
response head sent with the first body bytes. No keys, no limits, no usage, no
routing: what any Python gateway on this machine pays before it does its own work.

    .venv/bin/python tests/bench/relay_floor.py --port P --upstream HOST:PORT

bench_gateway.py runs it beside the gateway and nginx (``--floor``). A benchmark
reference only: no flow control, no timeouts, one request at a time per client
connection, a client that leaves mid-answer closes the engine's connection.
"""

from __future__ import annotations

import argparse
import asyncio

import httptools
import uvloop


class Upstream(asyncio.Protocol):
    """A keep-alive connection to the engine, relaying one answer at a time to
    ``self.client``."""

    def __init__(self, pool: list[Upstream]) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.client: Client | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.head = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self in self.pool:
            self.pool.remove(self)
        if self.client is not None:
            self.client.transport.close()  # type: ignore[union-attr]
            self.client = None

    def on_message_begin(self) -> None:
        self.type = b"application/json"

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-type":
            self.type = value

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self.head = (
            b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n"
            % (
                status,
                self.type,
            )
        )

    def on_body(self, body: bytes) -> None:
        if self.client is None:
            return
        frame = b"%x\r\n%s\r\n" % (len(body), body)
        if self.head:
            frame, self.head = self.head + frame, b""
        self.client.transport.write(frame)  # type: ignore[union-attr]

    def on_message_complete(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.transport.write(self.head + b"0\r\n\r\n")  # type: ignore[union-attr]
            client.upstream = None
        self.head = b""
        self.pool.append(self)


class Client(asyncio.Protocol):
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.upstream: Upstream | None = None
        self.body: list[bytes] = []
        self.headers: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.client = None
            self.upstream.transport.close()  # type: ignore[union-attr]

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-type", b"authorization"):
            self.headers.append(b"%s: %s\r\n" % (name, value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.body)
        head = b"%s %s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n" % (
            self.parser.get_method(),
            self.url,
            self.relay.host_header,
            len(body),
        )
        request = head + b"".join(self.headers) + b"\r\n" + body
        self.body, self.headers = [], []
        self.relay.send(self, request)


class Relay:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.host_header = f"{host}:{port}".encode()
        self.pool: list[Upstream] = []

    def send(self, client: Client, request: bytes) -> None:
        if self.pool:
            self._start(self.pool.pop(), client, request)
            return
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            loop.create_connection(lambda: Upstream(self.pool), self.host, self.port)
        )
        task.add_done_callback(lambda t: self._start(t.result()[1], client, request))

    def _start(self, upstream: Upstream, client: Client, request: bytes) -> None:
        upstream.client, client.upstream = client, upstream
        upstream.transport.write(request)  # type: ignore[union-attr]


async def serve(port: int, upstream: str) -> None:
    host, _, up_port = upstream.rpartition(":")
    relay = Relay(host, int(up_port))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Client(relay), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the engine")
    args = parser.parse_args()
    uvloop.run(serve(args.port, args.upstream))


if __name__ == "__main__":
    main()
