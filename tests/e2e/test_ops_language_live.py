"""Browser, zh-Hans: the step summaries pushed over the operation's WebSocket read the
same as after a reload (static/console/js/operation.js + format.js against the server's
console/opsmessages.py) for a failed remedy, verify-weights, a benchmark and a start."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.db import connection

from console.models import Cluster, Operation
from console.services.inventory import demo_seed
from console.services.operations import operation_publish
from tests.alerts.test_ops_language import untranslated
from tests.alerts.test_ops_language_runbooks import (
    benchmark_operation,
    remedy_operation,
    start_operation,
    weights_operation,
)
from tests.e2e.test_dashboard import browser_login, chromium, uvicorn_server
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

READ = """() => {
  const out = {};
  document.querySelectorAll('#steps li.step').forEach((li) => {
    out[li.id] = [li.querySelector('.step-name').textContent.trim(),
                  li.querySelector('.step-summary').textContent.trim()];
  });
  out.error = document.getElementById('op-error').textContent.trim();
  return out;
}"""
BLANK = """() => {
  document.querySelectorAll('#steps .step-name, #steps .step-summary').forEach((e) => { e.textContent = ''; });
  document.getElementById('op-error').textContent = '';
}"""
FILLED = """() => [...document.querySelectorAll('#steps .step-summary')].every((e) => e.textContent.trim())
  && document.getElementById('op-error').textContent.trim() !== ''"""


def _publish(op: Operation) -> None:
    """What the worker pushes: every step, then the final state (off Playwright's thread)."""
    try:
        op = Operation.objects.get(pk=op.pk)
        for step in op.steps.order_by("seq"):
            operation_publish(op, step)
    finally:
        connection.close()


def test_pushed_summaries_read_as_after_a_reload_in_zh_hans(tmp_path: Path) -> None:
    demo_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    ops = [
        remedy_operation(cluster),
        weights_operation(cluster, tmp_path),
        benchmark_operation(cluster, tmp_path),
        start_operation(cluster),
    ]
    make_user("zoe", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_context(locale="zh-CN").new_page()
        browser_login(page, base, "zoe")
        for op in ops:
            page.goto(f"{base}/operations/{op.pk}/")
            page.wait_for_selector("#op-conn.live", timeout=30_000)
            reloaded = page.evaluate(READ)
            assert reloaded["error"] and "：" in reloaded["error"], reloaded
            page.evaluate(BLANK)
            worker = threading.Thread(target=_publish, args=(op,))
            worker.start()
            worker.join(timeout=30)
            page.wait_for_function(FILLED, timeout=20_000)
            pushed = page.evaluate(READ)
            assert pushed == reloaded, (op.kind, pushed, reloaded)
            text = " ".join(" ".join(v) for v in pushed.values())
            assert untranslated(text) == [], (op.kind, untranslated(text))
