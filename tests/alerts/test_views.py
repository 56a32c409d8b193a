"""Alerts pages: list, ack and silence forms (operator, CSRF), rule form errors (admin), the banner."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.models import AuditEvent
from monitoring.alerts.services import alerts_evaluate
from monitoring.models.alerts import Alert, AlertRule, Silence
from tests.alerts.helpers import ingest
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def firing(cluster: Any) -> Alert:
    node = cluster.nodes.get(name="ascend-04")
    now = timezone.now()
    ingest(node, now, roce_down=5)
    alerts_evaluate(now=now)
    return Alert.objects.get(rule__name="RoCE NIC down")


def test_it_lists_alerts_and_shows_the_banner(firing: Alert, viewer: Any) -> None:
    response = login(viewer).get("/alerts/")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="alert-{firing.pk}"' in html and "ascend-04" in html
    assert 'data-count="1"' in html  # banner: one firing critical alert
    assert 'data-action="ack"' not in html  # viewers get no buttons


def test_it_counts_banner_alerts_in_one_query(firing: Alert, viewer: Any) -> None:
    client = login(viewer)
    with CaptureQueriesContext(connection) as ctx:
        client.get("/alerts/rules/")
    assert sum('"monitoring_alert"' in q["sql"] for q in ctx.captured_queries) == 1


def test_it_lets_an_operator_ack_and_silence_with_csrf(
    firing: Alert, operator: Any, viewer: Any
) -> None:
    assert login(viewer).post(f"/alerts/{firing.pk}/ack").status_code == 403
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(f"/alerts/{firing.pk}/ack").status_code == 403  # no CSRF token
    page = client.get("/alerts/").content.decode()
    assert 'data-action="ack"' in page
    token = client.cookies["csrftoken"].value
    response = client.post(f"/alerts/{firing.pk}/ack", {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    firing.refresh_from_db()
    assert firing.state == "acknowledged" and firing.acknowledged_by == operator
    response = client.post(
        f"/alerts/{firing.pk}/silence",
        {"csrfmiddlewaretoken": token, "hours": "4", "comment": "swap NIC"},
    )
    assert response.status_code == 302
    firing.refresh_from_db()
    assert firing.silenced and Silence.objects.get().target == "ascend-04"
    assert set(AuditEvent.objects.values_list("action", flat=True)) >= {
        "alert.acknowledge",
        "silence.create",
    }
    detail = client.get(f"/alerts/{firing.pk}/").content.decode()
    assert 'data-kind="acknowledged"' in detail and 'data-kind="silenced"' in detail


def test_it_rerenders_the_rule_form_with_field_errors(admin: Any) -> None:
    rule = AlertRule.objects.get(name="NPU temperature high")
    client = login(admin)
    data = {
        "name": rule.name,
        "metric": "chip.temp_c",
        "comparison": "gt",
        "threshold": "hot",
        "for_s": 10,
        "severity": "warning",
        "labels": "{}",
        "remediation_policy": "off",
        "remediation_action": "none",
        "enabled": "on",
        "resolve_threshold": "90",
    }
    response = client.post(f"/alerts/rules/{rule.pk}/edit", data)
    assert response.status_code == 400
    assert 'id="error-threshold"' in response.content.decode()
    response = client.post(
        f"/alerts/rules/{rule.pk}/edit",
        {**data, "threshold": "95", "metric": "chip.colour"},
    )
    assert (
        response.status_code == 400 and 'id="error-metric"' in response.content.decode()
    )
    response = client.post(f"/alerts/rules/{rule.pk}/edit", {**data, "threshold": "80"})
    assert (
        response.status_code == 400
        and 'id="error-resolve_threshold"' in response.content.decode()
    )
    rule.refresh_from_db()
    assert rule.threshold == 85.0
    response = client.post(f"/alerts/rules/{rule.pk}/edit", {**data, "threshold": "95"})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert (rule.threshold, rule.resolve_threshold) == (95.0, 90.0)
    assert AuditEvent.objects.filter(
        action="alert_rule.update", actor_name="ada"
    ).exists()


def test_it_refuses_rule_edits_below_admin(operator: Any, viewer: Any) -> None:
    rule = AlertRule.objects.get(name="NPU temperature high")
    assert login(viewer).get("/alerts/rules/").status_code == 200
    assert "alert-rule-edit" not in login(viewer).get("/alerts/rules/").content.decode()
    assert login(operator).get(f"/alerts/rules/{rule.pk}/edit").status_code == 403
    assert (
        login(operator)
        .post(f"/alerts/rules/{rule.pk}/edit", {"threshold": "1"})
        .status_code
        == 403
    )
    assert login(viewer).get("/alerts/rules/new").status_code == 403


def test_the_rule_preview_names_bad_fields_and_refuses_non_admins(
    cluster: Any, admin: Any, operator: Any
) -> None:
    url = "/alerts/rules/preview"
    assert (
        login(operator)
        .get(f"{url}?metric=chip.temp_c&comparison=gt&threshold=85")
        .status_code
        == 403
    )
    bad = login(admin).get(f"{url}?metric=chip.nope&comparison=gt&threshold=hot")
    body = bad.content.decode()
    assert (
        bad.status_code == 400
        and 'data-field="metric"' in body
        and 'data-field="threshold"' in body
    )
    ingest(cluster.nodes.get(name="ascend-01"), timezone.now(), temp=91.0)
    ok = login(admin).get(
        f"{url}?metric=chip.temp_c&comparison=gt&threshold=85&cluster={cluster.pk}"
    )
    assert (
        ok.status_code == 200
        and "rule-preview-summary" in ok.content.decode()
        and ok.content.decode().count("preview-match") == 1
    )
