"""Browser: a node's preflight checks appear on the operation page the moment its agent
answers, pushed over the operation's WebSocket (no reload, no polling)."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from console.models import Cluster, Node, Operation
from console.models.operations import OperationStep
from console.services.inventory import demo_seed
from console.services.operations import operation_publish
from tests.e2e.test_dashboard import (
    ARTIFACTS,
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHECKS = [
    {"name": "npu-smi health", "status": "pass", "evidence": "8/8 OK", "fix": ""},
    {
        "name": "hccn_tool -link npu3",
        "status": "fail",
        "evidence": "link status: DOWN",
        "fix": "Check the NPU 3 optical module and the switch port",
    },
]


def test_a_nodes_preflight_table_arrives_live() -> None:

    demo_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    node = Node.objects.get(name="ascend-03")
    op = Operation.objects.create(
        cluster=cluster, kind="preflight", state="running", started_at=timezone.now()
    )
    step = OperationStep.objects.create(
        operation=op, seq=1, name="Checks on ascend-03", node=node, state="running"
    )
    make_user("pia", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "pia")
        page.goto(f"{base}/operations/{op.pk}/")
        page.wait_for_selector("#op-conn.live", timeout=30_000)
        assert page.locator("#step-1 .step-checks").is_hidden()

        def answer() -> None:  # the runbook's finish(), off Playwright's thread
            try:
                OperationStep.objects.filter(pk=step.pk).update(
                    state="failed", data={"checks": CHECKS}, summary="link DOWN"
                )
                operation_publish(op, OperationStep.objects.get(pk=step.pk))
            finally:
                connection.close()

        worker = threading.Thread(target=answer)
        worker.start()
        worker.join(timeout=30)
        page.wait_for_selector("#step-1 .step-checks tr.check-fail", timeout=20_000)
        rows = page.locator("#step-1 .step-checks tr")
        assert rows.count() == 2
        # The failure leads; the pass is folded away under one line.
        assert "link status: DOWN" in rows.nth(0).inner_text()
        assert "optical module" in rows.nth(0).inner_text()
        assert page.is_visible("#step-1 tr.check-fail")
        assert page.is_hidden("#step-1 tr.check-pass")
        assert page.text_content("#step-1 .step-passed summary") == "1 check passed"
        page.reload()  # the same tables, rendered by the server
        assert page.locator("#step-1 .step-checks tr.check-fail").count() == 1
        assert page.is_hidden("#step-1 tr.check-pass")
        assert page.text_content("#step-1 .step-passed summary") == "1 check passed"


def make_run(cluster: Cluster, durations: dict[str, float], ago_s: float) -> None:
    """A finished start whose steps took ``durations`` seconds (the history the bar weighs by)."""
    t = timezone.now() - timedelta(seconds=ago_s)
    op = Operation.objects.create(
        cluster=cluster, kind="start", state="succeeded", started_at=t
    )
    for seq, (name, secs) in enumerate(durations.items(), start=1):
        OperationStep.objects.create(
            operation=op,
            seq=seq,
            name=name,
            state="succeeded",
            started_at=t,
            finished_at=t + timedelta(seconds=secs),
        )
        t += timedelta(seconds=secs)
    Operation.objects.filter(pk=op.pk).update(finished_at=t)


def test_progress_is_weighted_by_the_last_runs_and_passes_stay_folded() -> None:

    demo_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    history = {"Preflight": 5.0, "Start rank 0": 10.0, "Warm-up": 73.0, "Gate": 2.0}
    make_run(cluster, history, ago_s=3600)
    make_run(cluster, history, ago_s=1800)
    now = timezone.now()
    passes = [
        {"name": f"check {i}", "status": "pass", "evidence": "ok", "fix": ""}
        for i in range(56)
    ]
    op = Operation.objects.create(
        cluster=cluster,
        kind="start",
        state="running",
        started_at=now - timedelta(seconds=25),
        heartbeat_at=now,
        result={"preflight": {"nodes": {"ascend-01": passes + CHECKS[1:]}}},
    )
    for seq, name, state, began, ended in (
        (1, "Preflight", "warning", 25, 20),
        (2, "Start rank 0", "succeeded", 20, 10),
        (3, "Warm-up", "running", 10, None),
    ):
        OperationStep.objects.create(
            operation=op,
            seq=seq,
            name=name,
            state=state,
            started_at=now - timedelta(seconds=began),
            finished_at=None if ended is None else now - timedelta(seconds=ended),
            data={"checks": passes + CHECKS[1:]} if seq == 1 else {},
        )
    make_user("pia", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US", viewport={"width": 1440, "height": 900})
        browser_login(page, base, "pia")
        page.goto(f"{base}/operations/{op.pk}/")
        page.wait_for_selector("#op-conn.live", timeout=30_000)
        # (5 + 10 + 10 s of a 73 s warm-up) of 90 s ≈ 28 %, not 2 of 3 steps (67 %)
        percent = int(page.get_attribute("#op-progress", "data-percent") or "0")
        assert 20 <= percent <= 40, percent
        assert page.is_visible("#op-eta-part")
        eta = page.text_content("#op-eta") or ""
        assert eta.startswith("1 min") or eta.endswith(" s"), eta  # ~65 s left
        assert "min" in (page.text_content("#op-duration") or "") or " s" in (
            page.text_content("#op-duration") or ""
        )
        # One failure leads, 56 passes folded, no second preflight table.
        assert page.is_visible("#step-1 tr.check-fail")
        assert page.locator("#step-1 tr.check-pass").count() == 56
        assert page.is_hidden("#step-1 tr.check-pass >> nth=0")
        assert page.text_content("#step-1 .step-passed summary") == "56 checks passed"
        assert page.locator("text=Preflight results").count() == 0
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < 1600, height
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "operation-weighted.png"), full_page=True)


def test_step_names_read_in_the_readers_language_rendered_and_pushed() -> None:

    demo_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    node = Node.objects.get(name="ascend-01")
    op = Operation.objects.create(
        cluster=cluster,
        kind="start",
        state="running",
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    OperationStep.objects.create(
        operation=op, seq=1, name="Clear leftover engines", state="succeeded"
    )
    make_user("lan", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="zh-CN")
        browser_login(page, base, "lan")
        page.goto(f"{base}/operations/{op.pk}/")
        page.wait_for_selector("#op-conn.live", timeout=30_000)
        assert page.text_content("#step-1 .step-name") == "清理残留引擎"

        def push() -> None:
            try:
                step = OperationStep.objects.create(
                    operation=op,
                    seq=2,
                    name="Start rank 0 on ascend-01",
                    node=node,
                    state="running",
                )
                operation_publish(op, step)
            finally:
                connection.close()

        worker = threading.Thread(target=push)
        worker.start()
        worker.join(timeout=30)
        page.wait_for_selector("#step-2", timeout=20_000)
        assert page.text_content("#step-2 .step-name") == "在 ascend-01 上启动 rank 0"
