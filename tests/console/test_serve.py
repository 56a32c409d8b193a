"""python -m console.serve: uvicorn with a one-second housekeeping tick that a stop
signal cuts short, in the web process and in each --workers child."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from console import serve
from tests.agents import database_url, die_with_parent
from tests.factories import free_port
from tests.integration.test_agent import wait_for

ROOT = Path(__file__).resolve().parents[2]
IDLE_S = 3.0


async def _app(scope: Any, receive: Any, send: Any) -> None:  # never called
    raise AssertionError("no request is sent")


def _server() -> serve.Server:
    return serve.Server(uvicorn.Config(_app, lifespan="off"))


def test_each_tick_refreshes_the_date_header() -> None:
    server = _server()
    counters: list[int] = []
    dates: list[bytes] = []
    on_tick = server.on_tick

    async def counting(counter: int) -> bool:
        counters.append(counter)
        stop = await on_tick(counter)
        dates.append(dict(server.server_state.default_headers)[b"date"])
        return stop or len(counters) == 3

    server.on_tick = counting  # type: ignore[method-assign]
    started = time.monotonic()
    asyncio.run(server.main_loop())
    # uvicorn refreshes the header on the calls whose counter is a multiple of 10
    assert [c % 10 for c in counters] == [0, 0, 0]
    assert len(set(dates)) >= 2  # two ticks a second apart fall in different seconds
    assert time.monotonic() - started >= 2 * serve.TICK_S * 0.9


def test_a_stop_signal_ends_the_loop_at_once_not_at_the_next_tick() -> None:
    server = _server()

    async def run() -> float:
        loop_task = asyncio.create_task(server.main_loop())
        await asyncio.sleep(0.2)  # inside the one-second wait
        # a signal handler runs in the loop's thread between bytecodes; another
        # thread is the same for the wake-up (nothing of the loop's is touched)
        sent = time.monotonic()
        signaller = threading.Thread(
            target=server.handle_exit, args=(signal.SIGTERM, None)
        )
        signaller.start()
        await loop_task
        signaller.join()
        return time.monotonic() - sent

    took = asyncio.run(run())
    assert server.should_exit
    assert took < serve.TICK_S / 2, f"the loop ended {took:.2f} s after the signal"


def _main_thread_runs(pid: int) -> int:
    """How many times the kernel has run the process's main thread (schedstat's third
    field): each wake-up of an idle event loop is one."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[2])


@contextmanager
def _web(module: str, *extra: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    argv = [sys.executable, "-m", module, "console.asgi:application"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "DATABASE_URL": database_url()}
    proc = subprocess.Popen(
        [*argv, *extra], cwd=ROOT, env=env, preexec_fn=die_with_parent
    )
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _serving_pids(proc: subprocess.Popen[bytes], workers: int) -> list[int]:
    """The processes that run the event loop: the server itself, or with --workers
    the children that are neither the supervisor nor multiprocessing's helper."""
    if workers == 1:
        return [proc.pid]
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    serving = []
    for pid in map(int, children):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"resource_tracker" not in cmdline:
            serving.append(pid)
    return serving


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_an_idle_web_process_wakes_about_once_a_second_and_stops_on_sigint() -> None:
    runs = {
        # uvicorn's own command beside it: the same count shows ten a second there
        "uvicorn": ("uvicorn", 1),
        "serve": ("console.serve", 1),
        "serve --workers 2": ("console.serve", 2),
    }
    with ExitStack() as stack:
        procs = {}
        for name, (module, workers) in runs.items():
            extra = ("--workers", str(workers)) if workers > 1 else ()
            procs[name] = stack.enter_context(_web(module, *extra))

        def all_up() -> bool:
            for proc, base in procs.values():
                assert proc.poll() is None, "a web process exited while starting"
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code != 200:
                        return False
                except httpx.HTTPError:
                    return False
            return True

        wait_for(all_up, timeout=90)
        time.sleep(1)  # past the first requests' own wake-ups
        pids = {
            name: _serving_pids(procs[name][0], workers)
            for name, (_, workers) in runs.items()
        }
        assert len(pids["serve --workers 2"]) == 2
        before = {n: [_main_thread_runs(p) for p in ps] for n, ps in pids.items()}
        time.sleep(IDLE_S)
        woke = {
            n: [_main_thread_runs(p) - b for p, b in zip(ps, before[n], strict=True)]
            for n, ps in pids.items()
        }
        # a tick a second is ~3 in 3 s (each tick one or two wake-ups); uvicorn's own
        # ten a second ~30: the measurement tells the two apart
        assert min(woke["uvicorn"]) >= 20, woke
        assert max(woke["serve"] + woke["serve --workers 2"]) <= 10, woke

        for name in ("serve", "serve --workers 2"):
            proc = procs[name][0]
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=15) == 0, name


def test_help_says_what_it_is_and_lists_uvicorns_options() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "console.serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: python -m console.serve [OPTIONS] APP")
    assert "once a second" in result.stdout
    assert "--workers" in result.stdout and "--proxy-headers" in result.stdout
