"""The gateway's HTTP/1.1 client to the engines (console.gateway.upstream) against
real local servers that write exact bytes: keep-alive reuse, idle connections
retired before the engine's own keep-alive closes them, a request that meets a
connection the engine closed sent once more, and stalls, hang-ups, refusals and
answers that are not HTTP reported as such."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from console.gateway import upstream
from console.gateway.upstream import Unreachable, UpstreamError
from tests.factories import free_port

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Engine:
    """A TCP server answering each request with ``answer(n)`` (n: the request's number
    on its connection); None closes the connection without answering."""

    def __init__(self, answer: Callable[[int], bytes | None]) -> None:
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self.port = free_port()

    async def handle(self, reader: Any, writer: Any) -> None:
        self.connections += 1
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                size = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                await reader.readexactly(size)
                n += 1
                self.requests += 1
                answer = self.answer(n)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Engine:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await upstream.upstream_close()
        self.server.close()
        await self.server.wait_closed()

    async def post(self) -> bytes:
        resp = await upstream.post(f"http://127.0.0.1:{self.port}", "/v1/x", b"{}", {})
        body = await resp.read()
        resp.release()
        return body


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_requests_in_a_row_share_one_keep_alive_connection() -> None:
    async def go() -> tuple[list[bytes], int]:
        async with Engine(lambda n: OK) as engine:
            got = [await engine.post() for _ in range(5)]
            return got, engine.connections

    got, connections = _run(go())
    assert got == [b"{}"] * 5
    assert connections == 1


def test_a_connection_idle_past_idle_s_is_retired_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(upstream, "IDLE_S", 0.05)

    async def go() -> int:
        async with Engine(lambda n: OK) as engine:
            await engine.post()
            await asyncio.sleep(0.1)
            await engine.post()
            return engine.connections

    assert _run(go()) == 2


def test_a_request_meeting_a_connection_the_engine_closed_goes_once_more() -> None:
    # The engine closes its end as the second request arrives (its keep-alive ran
    # out): no byte of answer, so the request is sent again on a new connection.
    async def go() -> tuple[bytes, int, int]:
        async with Engine(lambda n: OK if n == 1 else None) as engine:
            await engine.post()
            body = await engine.post()
            return body, engine.connections, engine.requests

    body, connections, requests = _run(go())
    assert body == b"{}"
    assert (connections, requests) == (2, 3)


def test_a_new_connection_closed_without_an_answer_is_an_error_not_a_retry() -> None:
    async def go() -> int:
        async with Engine(lambda n: None) as engine:
            with pytest.raises(UpstreamError, match="before answering"):
                await engine.post()
            return engine.requests

    assert _run(go()) == 1  # sent once: the engine may have started on it


def test_an_engine_that_stalls_mid_stream_times_out() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = b"data: {}\n\n"

    async def go() -> list[bytes]:
        async with Engine(lambda n: head + b"%x\r\n%s\r\n" % (len(first), first)) as e:
            resp = await upstream.post(f"http://127.0.0.1:{e.port}", "/v1/x", b"{}", {})
            got = [await resp.next_chunk()]
            with pytest.raises(TimeoutError, match="sent nothing for 1 s"):
                got.append(await resp.next_chunk())
            resp.close()
            return got

    with override_settings(GATEWAY_UPSTREAM_TIMEOUT_S=1):
        assert _run(go()) == [first]


def test_a_refused_connection_is_unreachable() -> None:
    async def go() -> None:
        with pytest.raises(Unreachable, match="cannot connect"):
            await upstream.post(f"http://127.0.0.1:{free_port()}", "/v1/x", b"{}", {})
        await upstream.upstream_close()

    _run(go())


def test_an_answer_that_is_not_http_is_an_error() -> None:
    async def go() -> None:
        async with Engine(lambda n: b"SSH-2.0-OpenSSH_9.2\r\n\r\n") as engine:
            with pytest.raises(UpstreamError, match="not HTTP/1.1"):
                await engine.post()

    _run(go())


def test_an_answer_without_a_length_ends_with_the_connection() -> None:
    async def go() -> tuple[bytes, int]:
        answer = b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\nboom"
        async with Engine(lambda n: answer) as engine:
            resp = await upstream.post(
                f"http://127.0.0.1:{engine.port}", "/v1/x", b"{}", {}
            )
            status = resp.status
            body = await resp.read()
            resp.release()
            return body, status

    assert _run(go()) == (b"boom", 500)


def test_a_header_value_with_a_control_character_is_never_written() -> None:
    async def go() -> int:
        async with Engine(lambda n: OK) as engine:
            with pytest.raises(ValueError, match="control character"):
                await upstream.post(
                    f"http://127.0.0.1:{engine.port}",
                    "/v1/x",
                    b"{}",
                    {"X-Request-ID": "a\r\nX-Evil: 1"},
                )
            return engine.requests

    assert _run(go()) == 0
