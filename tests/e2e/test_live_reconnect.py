"""Browser: live pages survive the web server dropping every WebSocket.

The test kills the uvicorn process it started (the sockets close without a close frame,
as when a consumer died on the old channel-layer read timeout), changes things while the
pages are cut off, and starts uvicorn again on the same port. The pages must say
"Reconnecting…" while down, reconnect on their own, re-read what they missed (no reload)
and keep what the user had: the playground keeps the partial answer, marks it
interrupted and offers Retry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from console.models import Cluster, Node, Operation
from console.models.operations import OperationStep
from console.services.inventory import demo_seed
from monitoring.alerts.services import alert_rules_seed
from tests.e2e.test_alerts_page import fire
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    restartable_server,
)
from tests.factories import make_user
from tests.playground.conftest import MODEL, running_cluster, sim_engine

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def off_thread(fn: Callable[[], Any]) -> None:
    """Database work off Playwright's thread (its sync API runs an event loop here)."""

    def run() -> None:
        try:
            fn()
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=60)


def test_the_operation_page_shows_what_happened_while_its_socket_was_down() -> None:

    demo_seed()
    alert_rules_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    node = Node.objects.get(name="ascend-03")
    op = Operation.objects.create(
        cluster=cluster,
        kind="preflight",
        state="running",
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),  # a live control worker, as far as the reaper knows
    )
    step = OperationStep.objects.create(
        operation=op, seq=1, name="Checks on ascend-03", node=node, state="running"
    )
    make_user("rita", "operator")
    with ExitStack() as stack:
        server = stack.enter_context(restartable_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, server.base, "rita")
        page.goto(f"{server.base}/operations/{op.pk}/")
        page.wait_for_selector("#op-conn.live", timeout=30_000)
        assert page.text_content("#op-state") == "Running"
        assert page.locator("#cancel-form").count() == 1
        assert page.locator("#alerts-banner.hidden").count() == 1

        server.stop()
        page.wait_for_function(
            "document.getElementById('op-conn').textContent === 'Reconnecting…'",
            timeout=20_000,
        )
        assert "live" not in (page.get_attribute("#op-conn", "class") or "")
        assert page.text_content("#op-conn") == "Reconnecting…"

        def meanwhile() -> None:  # the operation ends and an alert fires, unseen
            now = timezone.now()
            OperationStep.objects.filter(pk=step.pk).update(
                state="succeeded", summary="58 checks passed", finished_at=now
            )
            Operation.objects.filter(pk=op.pk).update(
                state="succeeded", finished_at=now
            )
            fire(node)

        off_thread(meanwhile)
        server.start()
        # Back without a reload: the final state, read from the server after reconnecting.
        page.wait_for_selector("#op-conn.live", timeout=60_000)
        page.wait_for_function(
            "document.getElementById('op-state').textContent === 'Succeeded'",
            timeout=20_000,
        )
        assert page.text_content("#step-1 .step-state") == "Succeeded"
        assert "58 checks passed" in (page.text_content("#step-1") or "")
        assert page.locator("#cancel-form").count() == 0
        # The alerts banner (its own socket, on every page) re-read the firing count too.
        page.wait_for_selector("#alerts-banner:not(.hidden)", timeout=20_000)
        assert page.text_content("#alerts-banner-count") == "1"
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_the_playground_keeps_an_interrupted_answer_and_retries_it() -> None:

    make_user("chatter", "operator")
    with ExitStack() as stack:
        engine = stack.enter_context(sim_engine(MODEL, time_scale="0.3"))
        cluster = running_cluster(engine, name="pg-reconnect")
        server = stack.enter_context(restartable_server())
        browser = chromium(stack)
        page = browser.new_page(
            locale="en-US", viewport={"width": 1400, "height": 1000}
        )
        browser_login(page, server.base, "chatter")
        page.goto(f"{server.base}/playground/")
        page.wait_for_selector("#pg-conn.live", timeout=30_000)
        page.select_option("#pg-cluster", str(cluster.pk))
        page.wait_for_selector("#pg-send:not([disabled])", timeout=10_000)
        page.fill("#pg-max-tokens", "4000")
        page.fill("#pg-prompt", "Explain HCCS links on Atlas 800T A2.")
        page.click("#pg-send")
        answer = "#pg-history li.assistant .pg-text"
        page.wait_for_function(
            f"document.querySelector('{answer}')?.textContent.length > 20",
            timeout=30_000,
        )

        server.stop()
        page.wait_for_selector("#pg-history li.assistant.interrupted", timeout=20_000)
        partial = page.text_content(answer) or ""
        assert len(partial) > 20  # what had arrived stays on screen
        assert page.locator("#pg-history li").count() == 2  # the question stays too
        assert page.input_value("#pg-prompt") == ""
        assert page.text_content("#pg-conn") == "Reconnecting…"
        assert page.is_disabled("#pg-send")
        assert page.is_disabled("#pg-history .pg-retry")
        # Disabled looks disabled: faded, not the bright primary button.
        assert (
            float(page.eval_on_selector("#pg-send", "b => getComputedStyle(b).opacity"))
            < 0.6
        )
        stored = page.evaluate(
            "JSON.parse(sessionStorage.getItem('console.playground')).turns"
        )
        assert stored[-1]["interrupted"] is True and stored[-1]["content"] == partial

        server.start()
        page.wait_for_selector("#pg-conn.live", timeout=60_000)
        page.wait_for_selector("#pg-history .pg-retry:not([disabled])", timeout=20_000)
        page.fill("#pg-max-tokens", "30")  # a short answer this time
        page.click("#pg-history .pg-retry")
        page.wait_for_selector(
            "#pg-history li.assistant:not(.streaming):not(.interrupted) .pg-tps",
            timeout=120_000,
        )
        assert (
            page.locator("#pg-history li").count() == 2
        )  # the answer replaced, not added
        assert page.locator("#pg-history li.interrupted").count() == 0
        assert len(page.text_content(answer) or "") > 0
