"""Browser: a node's preflight checks appear on the operation page the moment its agent
answers, pushed over the operation's WebSocket (no reload, no polling)."""

from __future__ import annotations

import threading
from contextlib import ExitStack

import pytest
from django.db import connection
from django.utils import timezone

from console.models import Cluster, Node, Operation
from console.models.operations import OperationStep
from console.services.inventory import demo_seed
from console.services.operations import operation_publish
from tests.e2e.test_dashboard import CHROMIUM_ARGS, browser_login, uvicorn_server
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
    from playwright.sync_api import sync_playwright

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
        pw = stack.enter_context(sync_playwright())
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        stack.callback(browser.close)
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
        assert "link status: DOWN" in rows.nth(1).inner_text()
        assert "optical module" in rows.nth(1).inner_text()
        page.reload()  # the same table, rendered by the server
        assert page.locator("#step-1 .step-checks tr.check-fail").count() == 1
