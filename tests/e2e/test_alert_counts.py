"""Browser: warnings are visible on every page, and a resolved alert says when and how bad.

A firing warning turns the banner on (amber, not red) and puts a count on the Alerts link
of the navigation, live; an alert that resolves moves to "Recently resolved" with its
resolved time and its peak value, not the recovered last reading.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.utils import timezone

from console.models import Cluster
from console.services.inventory import demo_seed
from monitoring.alerts.services import alert_rules_seed, alerts_publish
from monitoring.models.alerts import Alert, AlertRule
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    off_thread,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_warning_shows_on_every_page_and_a_resolved_alert_shows_its_peak() -> None:

    demo_seed()
    alert_rules_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    rule = AlertRule.objects.get(name="NPU temperature high")
    assert rule.severity == "warning"
    make_user("wen", "viewer")
    holder: list[Alert] = []

    def fire_warning() -> None:
        now = timezone.now()
        alert = Alert.objects.create(
            rule=rule,
            cluster=cluster,
            target="ascend-02/npu5.0",
            state="firing",
            severity="warning",
            value=88.0,
            peak_value=91.4,
            fault_onset_at=now - timedelta(seconds=20),
            pending_at=now - timedelta(seconds=20),
            fired_at=now - timedelta(seconds=10),
        )
        holder.append(alert)
        alerts_publish(
            [Alert.objects.select_related("rule", "cluster").get(pk=alert.pk)]
        )

    def resolve() -> None:
        alert = Alert.objects.select_related("rule", "cluster").get(pk=holder[0].pk)
        alert.state = "resolved"
        alert.value = 61.0
        alert.resolved_at = timezone.now()
        alert.save()
        alerts_publish([alert])

    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "wen")
        page.wait_for_function(
            "document.body.getAttribute('data-alerts-socket') === 'live'",
            timeout=30_000,
        )
        assert page.locator("#alerts-banner.hidden").count() == 1
        assert page.locator("#nav-alerts-count.hidden").count() == 1

        off_thread(fire_warning)
        page.wait_for_selector("#alerts-banner:not(.hidden)", timeout=20_000)
        assert "is-warning" in (page.get_attribute("#alerts-banner", "class") or "")
        assert page.text_content("#alerts-banner-warning") == "1"
        assert page.is_hidden("#alerts-banner-critical-part")
        assert "1 warning alerts firing" in " ".join(
            (page.inner_text("#alerts-banner") or "").split()
        )
        assert page.text_content("#nav-alerts-count") == "1"
        page.reload()  # rendered by the server the same way
        assert page.text_content("#nav-alerts-count") == "1"
        assert page.is_visible("#alerts-banner-warning-part")

        page.goto(f"{base}/alerts/")
        page.wait_for_selector("#conn-state.live", timeout=30_000)
        alert = holder[0]
        off_thread(resolve)
        row = f"#alerts-resolved #alert-{alert.pk}"
        page.wait_for_selector(row, timeout=20_000)
        assert page.text_content(f"{row} [data-field=value]") == "91 °C"  # the peak
        resolved_text = page.text_content(f"{row} [data-field=resolved_at]") or ""
        assert resolved_text.startswith(timezone.now().strftime("%Y-"))
        assert page.locator("#alerts-banner.hidden").count() == 1
        assert page.locator("#nav-alerts-count.hidden").count() == 1
        page.reload()
        assert page.text_content(f"{row} [data-field=value]") == "91 °C"
        assert page.text_content(f"{row} [data-field=resolved_at]") == resolved_text
