"""Browser: the incidents page draws the detection / recovery histogram; an operator approves an "ask" incident."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.utils import timezone

from console.models import Cluster, ClusterState
from console.services.inventory import demo_seed
from monitoring import remediation
from monitoring.alerts.services import alert_rules_seed
from monitoring.models import Alert, AlertRule, Incident
from tests.e2e.test_dashboard import (
    ARTIFACTS,
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def seed() -> Incident:
    demo_seed()
    alert_rules_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    now = timezone.now()
    hccs = AlertRule.objects.get(name="HCCS link loss")
    for k, (detect, mttr) in enumerate([(2.0, 40.0), (3.0, 55.0), (6.0, 200.0)]):
        onset = now - timedelta(minutes=10 * (k + 1))
        alert = Alert.objects.create(
            rule=hccs,
            cluster=cluster,
            target=f"old-{k}",
            state="resolved",
            severity="warning",
            fault_onset_at=onset,
            pending_at=onset,
        )
        Incident.objects.create(
            alert=alert,
            cluster=cluster,
            action="failover",
            policy="auto",
            state="recovered",
            fault_onset_at=onset,
            detected_at=onset + timedelta(seconds=detect),
            operation_started_at=onset + timedelta(seconds=detect + 0.4),
            resolved_at=onset + timedelta(seconds=mttr),
        )
    rule = AlertRule.objects.get(name="Requests waiting")
    AlertRule.objects.filter(pk=rule.pk).update(
        remediation_policy="ask", remediation_action="restart"
    )
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        target=cluster.name,
        state="firing",
        severity=rule.severity,
        value=40.0,
        fault_onset_at=now,
        pending_at=now,
        fired_at=now,
    )
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == "awaiting_approval"
    return incident


def test_the_histogram_draws_and_an_operator_approves_from_the_incident_page() -> None:

    incident = seed()
    make_user("ivy", "operator")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "ivy")
        page.goto(f"{base}/alerts/incidents/")
        page.wait_for_selector("#incident-histogram canvas", timeout=15_000)
        legend = page.locator("#incident-histogram .u-legend").inner_text()
        assert "detection" in legend and "time to recovery" in legend
        cells = page.locator("#incident-stats tr[data-series=detection] td")
        # detections 0 (the ask one), 2, 3 and 6 s: nearest-rank p50 = 2.0, p95 = 6.0
        assert [cells.nth(i).inner_text() for i in range(3)] == ["4", "2.0", "6.0"]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=str(ARTIFACTS / "incidents.png"), full_page=True
        )  # for people, not asserted
        page.click(f"#incident-{incident.pk} a")
        page.wait_for_selector("#incident-decide")
        page.once("dialog", lambda d: d.accept())
        page.click("#incident-decide button[value=approve]")
        page.wait_for_url(f"{base}/operations/*/", timeout=15_000)
        assert (
            "Restart" in page.locator("h1").inner_text()
            or "restart" in page.content().lower()
        )


def test_an_incident_page_follows_its_incident_live() -> None:
    """Another operator rejects the incident: the open page shows it without a reload."""
    from django.db import connection

    incident = seed()
    make_user("ivy", "operator")
    other = make_user("jon", "operator")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "ivy")
        url = f"{base}/alerts/incidents/{incident.pk}/"
        page.goto(url)
        page.wait_for_selector("#incident-decide")
        page.wait_for_selector("body[data-alerts-socket=live]", timeout=30_000)
        assert page.locator("#incident-live[data-refreshed]").count() == 0

        def reject() -> None:  # database work off Playwright's event-loop thread
            try:
                remediation.incident_reject(incident=incident, user=other)
            finally:
                connection.close()

        worker = threading.Thread(target=reject)
        worker.start()
        worker.join(timeout=60)
        page.wait_for_selector("#incident-live[data-refreshed]", timeout=20_000)
        assert page.locator("#incident-state").inner_text() == "Rejected"
        assert page.locator("#incident-decide").count() == 0  # nothing left to decide
        assert "rejected by jon" in page.locator("#incident-timeline").inner_text()
        assert page.url == url  # updated in place, not reloaded
    incident.refresh_from_db()
    assert incident.state == "rejected"
