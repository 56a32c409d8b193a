"""Browser: log in, open the running sim cluster's dashboard, watch a chart gain points and the heatmap fill 32 chips.

Everything is real: four agent workers (Celery on the session's Redis) with the sim
tools, a sim vLLM engine on the head, uvicorn serving the ASGI app on a free port,
collection rounds pushed over the channel layer, and Debian's chromium.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from console.services.agents import agent_call
from monitoring.tasks import collect_round_task
from tests.agents import agent_worker, database_url, die_with_parent
from tests.factories import free_port, make_cluster, make_user
from tests.integration.test_agent import FAST_SIM, single_node_plan, wait_for

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def browser_login(page: Any, base: str, username: str) -> None:
    """Log in through the real login form (test users have password ``pw-<name>``)."""
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def chromium(stack: ExitStack) -> Any:
    """Debian's chromium under Playwright, closed when ``stack`` unwinds."""
    from playwright.sync_api import sync_playwright

    browser = stack.enter_context(sync_playwright()).chromium.launch(
        executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
    )
    stack.callback(browser.close)
    return browser


def off_thread(fn: Callable[[], Any]) -> None:
    """Run ``fn`` (database work) off Playwright's thread, which has an event loop
    that Django's sync ORM refuses to run in."""

    def run() -> None:
        try:
            fn()
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=60)


class UvicornServer:
    """The console's ASGI app in a real uvicorn process (``python -m console.serve``,
    as the web unit runs it) on the test database.

    ``stop()`` and ``start()`` again restart it on the same port: what a deploy or a
    crashed web process does to every open WebSocket.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "PYTHONUNBUFFERED": "1",
        }
        argv = [
            sys.executable,
            "-m",
            "console.serve",
            "console.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=die_with_parent,
        )
        self.proc = proc

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"uvicorn exited:\n{proc.stdout.read() if proc.stdout else ''}"
                )
            try:
                return httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=60)

    def stop(self) -> None:
        """Kill the process (no graceful close of its sockets: the browser sees them drop)."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(timeout=15)
        self.proc = None


@contextmanager
def uvicorn_server() -> Iterator[str]:
    """A started ``UvicornServer``; yields its base URL and stops it at the end."""
    with restartable_server() as server:
        yield server.base


@contextmanager
def restartable_server() -> Iterator[UvicornServer]:
    server = UvicornServer()
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            server.proc.terminate()
            try:
                server.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.proc.kill()


@contextmanager
def collecting(interval_s: float = 1.0) -> Iterator[None]:
    """Run collection rounds (what beat schedules) in a thread until the block ends."""
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.is_set():
                started = time.monotonic()
                collect_round_task()
                stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def test_it_shows_live_charts_and_a_32_chip_heatmap(tmp_path: Path) -> None:

    from monitoring.alerts.services import alert_rules_seed

    alert_rules_seed()  # the threshold lines come from the enabled rules (a flush before may have emptied them)
    cluster = make_cluster(name="e2e-sim", nodes=4)
    nodes = cluster.ranked_nodes()
    head = nodes[0]
    head.management_ip, head.api_port, head.rpc_port = (
        "127.0.0.1",
        free_port(),
        free_port(),
    )
    head.save()
    make_user("watcher", "viewer")
    with ExitStack() as stack:
        for i, node in enumerate(nodes):
            env = {
                **FAST_SIM,
                "SIM_STATE_DIR": str(tmp_path / node.name),
                "SIM_NPU_IPS": ",".join(f"127.10.{90 + i}.{k + 1}" for k in range(8)),
            }
            stack.enter_context(agent_worker(node.name, extra_env=env))
        agent_call(
            head.name,
            "engine.start",
            plan=single_node_plan(head.name, head.api_port, head.rpc_port),
        )
        wait_for(
            lambda: agent_call(head.name, "engine.status")["health"] == 200, timeout=60
        )
        base = stack.enter_context(uvicorn_server())
        stack.enter_context(collecting())
        browser = chromium(stack)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        browser_login(page, base, "watcher")
        page.goto(f"{base}/monitoring/clusters/{cluster.pk}/")
        page.wait_for_selector("#conn-state.live", timeout=30_000)
        assert (
            page.locator(".uplot").count() >= 5
        )  # the charting library drew the charts

        def points() -> int:
            return int(page.get_attribute("#chart-queue", "data-points") or 0)

        before = points()
        page.wait_for_function(
            f"Number(document.querySelector('#chart-queue').dataset.points || 0) > {before + 1}",
            timeout=30_000,
        )
        for _ in range(3):  # traffic so latency charts get values too
            httpx.post(
                f"http://127.0.0.1:{head.api_port}/v1/completions",
                json={"model": "small", "prompt": "hi", "max_tokens": 8},
                timeout=30,
            )
        page.wait_for_function(
            "document.querySelectorAll('#heatmap td.heat-cell').length === 32 && "
            "[...document.querySelectorAll('#heatmap td.heat-cell')].every(td => td.textContent.trim() !== '—')",
            timeout=30_000,
        )
        assert points() > before
        assert page.locator("#heatmap td.heat-cell").count() == 32
        page.wait_for_function(
            "!document.querySelector('#chart-queue').classList.contains('is-empty')",
            timeout=30_000,
        )
        check_grafana_conventions(page)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        agent_call(head.name, "engine.stop", grace_s=10)
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def check_grafana_conventions(page: Any) -> None:
    """Power, per-NPU HCCS and RoCE panels fill; legends say "NPU n" and show values without
    hovering; threshold lines are labelled; drag zooms and holds; an absolute range shows."""
    page.wait_for_function(
        "Number(document.querySelector('#chart-power').dataset.points || 0) > 0"
        " && !document.querySelector('#chart-power').classList.contains('is-empty')",
        timeout=30_000,
    )
    for chart in ("#chart-chiploss", "#chart-roce"):
        assert int(page.get_attribute(chart, "data-points") or 0) > 0
    legend = page.inner_text("#chart-temp .u-legend")
    assert "NPU 0" in legend and "chip" not in legend.lower()
    assert "--" not in page.inner_text(
        "#chart-queue .u-legend"
    )  # latest values, not hover-only
    assert "°C" in legend
    assert page.get_attribute("#chart-temp", "data-threshold-label").endswith("°C")
    assert page.get_attribute("#chart-tps", "data-threshold-label").startswith("target")
    # Drag across the queue chart: it zooms and keeps the span while points arrive.
    box = page.locator("#chart-queue .u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(
        box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2, steps=5
    )
    page.mouse.up()
    page.wait_for_selector("#zoom-reset:not([hidden])", timeout=5_000)
    page.click("#zoom-reset")
    assert page.is_hidden("#zoom-reset")
    # An absolute range (the last ten minutes, typed as local times) pauses live updates.
    page.evaluate(
        """() => {
          const pad = n => String(n).padStart(2, '0');
          const f = d => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
          const now = new Date();
          document.getElementById('abs-from').value = f(new Date(now - 600000));
          document.getElementById('abs-to').value = f(new Date(now.getTime() + 60000));
        }"""
    )
    page.click("#abs-form button[type=submit]")
    page.wait_for_function(
        "document.getElementById('dashboard-mode').textContent.length > 0",
        timeout=5_000,
    )
    page.wait_for_selector("#abs-live:not([hidden])")
    page.click("#abs-live")
    assert page.text_content("#dashboard-mode") == ""
