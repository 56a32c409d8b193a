"""Soak (not collected by the suite; ~SOAK_S + 1 min): a live dashboard, an operation page
and a playground stay open for SOAK_S seconds (default 600) and see every update, with no
reload and no dropped socket.

Run:  .venv/bin/python -m pytest tests/e2e/soak_live_pages.py -o python_files='soak_*.py' \\
          -p no:cacheprovider --timeout 1500 -q -s

Real parts as in test_dashboard (four agent workers, a sim engine, collection rounds each
second over the channel layer, uvicorn, chromium) plus a second sim engine behind a
one-node cluster for the playground. Figures are printed; the assertions are about
completeness (every round seen, every answer finished), not timing.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from console.models import Operation
from console.models.operations import OperationStep
from console.services.agents import agent_call
from console.services.operations import operation_publish
from monitoring.tasks import collect_round_task
from tests.agents import agent_worker
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import free_port, make_cluster, make_user
from tests.integration.test_agent import FAST_SIM, single_node_plan, wait_for
from tests.playground.conftest import MODEL, running_cluster
from tests.simengine import sim_engine

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SOAK_S = float(os.environ.get("SOAK_S", "600"))
STATS = "JSON.stringify(window.consoleLive.stats)"


def test_live_pages_see_every_update_for_the_whole_soak(tmp_path: Path) -> None:
    import json

    cluster = make_cluster(name="soak-sim", nodes=4)
    nodes = cluster.ranked_nodes()
    head = nodes[0]
    head.management_ip, head.api_port, head.rpc_port = (
        "127.0.0.1",
        free_port(),
        free_port(),
    )
    head.save()
    op = Operation.objects.create(
        cluster=cluster,
        kind="start",
        state="running",
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    step = OperationStep.objects.create(
        operation=op,
        seq=1,
        name="Warm-up requests",
        state="running",
        started_at=timezone.now(),
        progress_total=1000,
    )
    make_user("soak", "operator")
    rounds = {"n": 0}
    published = {"n": 0}
    stop = threading.Event()

    def collect() -> None:  # what beat schedules, once a second
        try:
            while not stop.is_set():
                started = time.monotonic()
                collect_round_task()
                rounds["n"] += 1
                stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))
        finally:
            connection.close()

    def progress() -> None:  # the operation moves every 5 s (heartbeat included)
        try:
            while not stop.wait(5):
                published["n"] += 1
                OperationStep.objects.filter(pk=step.pk).update(
                    progress_done=published["n"]
                )
                Operation.objects.filter(pk=op.pk).update(heartbeat_at=timezone.now())
                operation_publish(
                    Operation.objects.get(pk=op.pk),
                    OperationStep.objects.get(pk=step.pk),
                )
        finally:
            connection.close()

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
        chat_engine = stack.enter_context(sim_engine(MODEL, time_scale="0.3"))
        chat = running_cluster(chat_engine, name="soak-chat")
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        context = browser.new_context(
            locale="en-US", viewport={"width": 1440, "height": 1000}
        )
        dash = context.new_page()
        browser_login(dash, base, "soak")
        dash.goto(f"{base}/monitoring/clusters/{cluster.pk}/")
        oppage = context.new_page()
        oppage.goto(f"{base}/operations/{op.pk}/")
        play = context.new_page()
        play.goto(f"{base}/playground/")
        for page, conn in (
            (dash, "#conn-state"),
            (oppage, "#op-conn"),
            (play, "#pg-conn"),
        ):
            page.wait_for_selector(f"{conn}.live", timeout=60_000)
        play.select_option("#pg-cluster", str(chat.pk))
        play.wait_for_selector("#pg-send:not([disabled])", timeout=20_000)
        play.fill("#pg-max-tokens", "200")

        threads = [threading.Thread(target=collect), threading.Thread(target=progress)]
        for t in threads:
            t.start()
        stack.callback(lambda: [t.join(timeout=30) for t in threads])
        stack.callback(stop.set)
        started = time.monotonic()
        answers = 0
        while time.monotonic() - started < SOAK_S:
            play.fill("#pg-prompt", f"Soak question {answers + 1}: what is HCCS?")
            play.click("#pg-send")
            answers += 1
            play.wait_for_function(
                f"document.querySelectorAll('#pg-history li.assistant .pg-tps').length === {answers}",
                timeout=120_000,
            )
            play.wait_for_timeout(
                max(0, min(60_000, int((SOAK_S - (time.monotonic() - started)) * 1000)))
            )
        stop.set()
        for t in threads:
            t.join(timeout=30)

        def finish() -> (
            None
        ):  # off Playwright's thread (its sync API runs an event loop here)
            try:
                OperationStep.objects.filter(pk=step.pk).update(
                    state="succeeded", finished_at=timezone.now()
                )
                Operation.objects.filter(pk=op.pk).update(
                    state="succeeded", finished_at=timezone.now()
                )
                operation_publish(
                    Operation.objects.get(pk=op.pk),
                    OperationStep.objects.get(pk=step.pk),
                )
            finally:
                connection.close()

        closer = threading.Thread(target=finish)
        closer.start()
        closer.join(timeout=30)
        try:
            oppage.wait_for_function(
                "document.getElementById('op-state').textContent.trim() === 'Succeeded'",
                timeout=30_000,
            )
        except Exception:
            print(
                "op page:",
                oppage.text_content("#op-state"),
                oppage.text_content("#op-conn"),
            )
            raise
        dash.wait_for_timeout(3000)  # the last round's push
        figures = {
            name: json.loads(page.evaluate(STATS))
            for name, page in (
                ("dashboard", dash),
                ("operation", oppage),
                ("playground", play),
            )
        }
        reloads = [
            p.evaluate("performance.getEntriesByType('navigation').length")
            for p in (dash, oppage, play)
        ]
        print(
            f"\nsoak {SOAK_S:.0f} s: {rounds['n']} collection rounds, {published['n']} progress pushes, "
            f"{answers} playground answers; pages saw {json.dumps(figures)}; navigations {reloads}"
        )
        seen = figures["dashboard"]["messages"].get("telemetry.update", 0)
        assert seen >= rounds["n"] - 2, (
            seen,
            rounds["n"],
        )  # every round but the in-flight ones
        assert (
            figures["operation"]["messages"].get("operation.progress", 0)
            >= published["n"]
        )
        assert all(f["drops"] == 0 for f in figures.values()), figures
        assert reloads == [1, 1, 1]
        assert play.locator("#pg-history li.interrupted").count() == 0
        assert play.locator("#pg-history li.assistant").count() == answers
        assert oppage.text_content("#step-1 .step-state") == "Succeeded"
        agent_call(head.name, "engine.stop", grace_s=10)
