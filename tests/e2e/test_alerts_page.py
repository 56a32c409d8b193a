"""Browser: the alerts page and the critical banner update live when an alert fires; an operator acks it."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from console.models import Node
from console.services.inventory import demo_seed
from monitoring.alerts.services import alert_rules_seed, alerts_evaluate
from monitoring.models.alerts import Alert
from tests.alerts.helpers import ingest
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def fire(node: Node) -> Alert:
    try:
        t0 = timezone.now()
        ingest(node, t0)
        ingest(node, t0 + timedelta(seconds=5), advance={0: (1000, 200, 0)})
        alerts_evaluate(now=t0 + timedelta(seconds=5))
        return Alert.objects.get(rule__name="HCCS link loss")
    finally:
        connection.close()


def test_it_shows_a_firing_alert_live_and_acknowledges_it() -> None:

    demo_seed()
    alert_rules_seed()
    make_user("otto", "operator")
    node = Node.objects.get(name="ascend-03")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "otto")
        page.goto(f"{base}/alerts/")
        page.wait_for_selector("#conn-state.live", timeout=30_000)
        assert page.locator("#alerts-banner.hidden").count() == 1
        # Playwright's sync API runs an event loop in this thread: database work goes to another one.
        fired: list[Alert] = []
        worker = threading.Thread(target=lambda: fired.append(fire(node)))
        worker.start()
        worker.join(timeout=60)
        alert = fired[0]
        row = f"#alerts-active #alert-{alert.pk}"
        page.wait_for_selector(f"{row}[data-state=firing]", timeout=20_000)
        page.wait_for_selector("#alerts-banner:not(.hidden)", timeout=20_000)
        assert page.text_content("#alerts-banner-count") == "1"
        page.click(f"{row} [data-action=ack]")
        page.wait_for_selector(f"{row}[data-state=acknowledged]", timeout=20_000)
        assert page.text_content(f"{row} [data-field=acknowledged_by]") == "otto"
    alert.refresh_from_db()
    assert alert.state == "acknowledged" and alert.acknowledged_by is not None
