"""The sim engine closes an idle keep-alive connection as vLLM's API server does:
after VLLM_HTTP_TIMEOUT_KEEP_ALIVE seconds (5 by default; vllm/envs.py, passed to
uvicorn as timeout_keep_alive), so a client that pools connections meets the same
closed sockets it would on a real site."""

from __future__ import annotations

import socket
import time

import pytest

from tests.simengine import sim_engine

pytestmark = pytest.mark.integration

REQUEST = b"GET /health HTTP/1.1\r\nHost: sim\r\n\r\n"


def _idle_close_after(port: int, wait_s: float) -> bytes:
    """The bytes a kept-alive connection yields ``wait_s`` after its first answer
    (b"" once the server has closed it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(REQUEST)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(wait_s)
        sock.settimeout(0.2)
        try:
            return sock.recv(4096)
        except TimeoutError:
            return b"still open"


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout() -> None:
    with sim_engine("ka-model", extra_env={"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "1"}) as e:
        assert _idle_close_after(e.port, 0.3) == b"still open"
        assert _idle_close_after(e.port, 1.6) == b""
