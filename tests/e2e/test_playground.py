"""Browser: an operator chats in the playground, sees tokens and the TTFT, presses Stop.

Real parts: a slowed sim vLLM engine, uvicorn serving the ASGI app (the consumer streams
from the engine; the browser only talks to the console), the Redis channel layer for the
cluster state push, and Debian's chromium.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.db import connection

from console.models import ClusterState
from console.services.operations import cluster_set_state
from tests.e2e.test_dashboard import (
    ARTIFACTS,
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user
from tests.integration.test_agent import wait_for
from tests.playground.conftest import MODEL, running_cluster, sim_engine

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def set_state(cluster: object, state: str) -> None:
    """An operation's state change, from a thread (Playwright owns this loop)."""

    def run() -> None:
        try:
            cluster_set_state(cluster, state)  # type: ignore[arg-type]
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result()


def test_it_streams_an_answer_shows_ttft_and_stops_mid_answer(tmp_path: Path) -> None:

    make_user("chatter", "operator")
    with ExitStack() as stack:
        engine = stack.enter_context(sim_engine(MODEL, time_scale="0.3"))
        cluster = running_cluster(engine, name="pg-e2e")
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        browser_login(page, base, "chatter")
        page.click("a[href='/playground/']")
        page.wait_for_selector("#pg-conn.live", timeout=30_000)
        page.select_option("#pg-cluster", str(cluster.pk))
        page.wait_for_selector("#pg-send:not([disabled])", timeout=10_000)
        assert page.is_hidden("#pg-banner")

        aborts = engine.aborts()
        page.fill("#pg-max-tokens", "4000")
        page.fill("#pg-prompt", "Explain HCCS links on Atlas 800T A2.")
        page.click("#pg-send")
        answer = "#pg-history li.assistant.streaming .pg-text"
        page.wait_for_function(
            f"document.querySelector('{answer}')?.textContent.length > 5",
            timeout=30_000,
        )
        first = len(page.text_content(answer) or "")
        page.wait_for_function(
            f"document.querySelector('{answer}')?.textContent.length > {first + 5}",
            timeout=30_000,
        )  # still growing: tokens stream in, not one block
        ttft = page.text_content("#pg-history li.assistant .pg-ttft") or ""
        assert "TTFT" in ttft and " ms" in ttft
        page.click("#pg-stop-btn")
        page.wait_for_selector("#pg-history li.assistant .pg-stopped", timeout=10_000)
        assert page.locator("#pg-history li.assistant.streaming").count() == 0
        wait_for(lambda: engine.aborts() == aborts + 1, timeout=15)
        page.wait_for_selector("#pg-send:not([disabled])", timeout=5_000)
        stopped_ttft = page.text_content("#pg-history li.assistant .pg-ttft") or ""
        assert stopped_ttft.endswith(" ms") and "—" not in stopped_ttft
        partial = page.text_content("#pg-history li.assistant .pg-text") or ""
        assert len(partial) > first

        # The snippets target the console gateway with the key placeholder.
        page.click("#pg-copy-curl")
        snippet = page.text_content("#pg-snippet") or ""
        assert (
            f"{base}/v1/chat/completions" in snippet and "$CONSOLE_API_KEY" in snippet
        )
        page.click("#pg-copy-python")
        snippet = page.text_content("#pg-snippet") or ""
        assert (
            f'base_url="{base}/v1"' in snippet
            and "CONSOLE_API_KEY" in snippet
            and '"pg-model"' in snippet
        )

        # The conversation survives a reload (sessionStorage) until cleared.
        page.reload()
        page.wait_for_selector("#pg-conn.live", timeout=30_000)
        assert page.locator("#pg-history li").count() == 2
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)
        page.click("#pg-clear")
        assert page.locator("#pg-history li").count() == 0

        # A restart pushes the state: banner on, sending off.
        set_state(cluster, ClusterState.STARTING)
        page.wait_for_selector("#pg-banner:not([hidden])", timeout=10_000)
        assert page.is_disabled("#pg-send")
        set_state(cluster, ClusterState.RUNNING)
        page.wait_for_selector("#pg-send:not([disabled])", timeout=10_000)
