"""Alerts REST API: roles, bad input names the field, nothing half-applied, audit rows."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from console.models import AuditEvent
from monitoring.alerts.services import alerts_evaluate
from monitoring.models.alerts import Alert, AlertRule, Silence
from tests.alerts.helpers import ingest
from tests.conftest import login

pytestmark = pytest.mark.django_db

RULE = {
    "name": "Hot chip",
    "metric": "chip.temp_c",
    "comparison": "gt",
    "threshold": 80,
    "severity": "critical",
}


def post(client: Any, url: str, data: dict[str, Any], method: str = "post") -> Any:
    return getattr(client, method)(
        url, json.dumps(data), content_type="application/json"
    )


def test_it_rejects_an_unknown_metric_naming_the_field(admin: Any) -> None:
    response = post(
        login(admin), "/api/alert-rules/", {**RULE, "metric": "chip.colour"}
    )
    assert response.status_code == 400
    assert "unknown metric 'chip.colour'" in response.json()["metric"][0]
    assert "chip.temp_c" in response.json()["metric"][0]
    assert not AlertRule.objects.filter(name="Hot chip").exists()


def test_it_rejects_a_threshold_that_is_not_a_number(admin: Any) -> None:
    response = post(login(admin), "/api/alert-rules/", {**RULE, "threshold": "hot"})
    assert response.status_code == 400 and response.json()["threshold"] == [
        "must be a number, for example 85 or 0.5"
    ]
    rule = AlertRule.objects.get(name="NPU temperature high")
    response = post(
        login(admin),
        f"/api/alert-rules/{rule.pk}/",
        {"threshold": "x", "for_s": 1},
        "patch",
    )
    assert response.status_code == 400 and "threshold" in response.json()
    rule.refresh_from_db()
    assert rule.threshold == 85.0 and rule.for_s == 10  # nothing half-applied


def test_it_rejects_a_resolve_threshold_on_the_wrong_side(admin: Any) -> None:
    response = post(
        login(admin), "/api/alert-rules/", {**RULE, "resolve_threshold": 90}
    )
    assert response.status_code == 400 and "resolve_threshold" in response.json()


def test_it_lets_an_admin_create_change_and_delete_a_rule_audited(admin: Any) -> None:
    client = login(admin)
    response = post(client, "/api/alert-rules/", {**RULE, "labels": {"team": "ops"}})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["scope"] == "chip" and body["labels"] == {"team": "ops"}
    response = post(
        client, f"/api/alert-rules/{body['id']}/", {"threshold": 82.5}, "patch"
    )
    assert response.status_code == 200 and response.json()["threshold"] == 82.5
    assert client.delete(f"/api/alert-rules/{body['id']}/").status_code == 204
    actions = list(
        AuditEvent.objects.filter(target_repr="Hot chip")
        .order_by("pk")
        .values_list("action", "actor_name")
    )
    assert actions == [
        ("alert_rule.create", "ada"),
        ("alert_rule.update", "ada"),
        ("alert_rule.delete", "ada"),
    ]


def test_it_lets_a_viewer_read_but_not_edit_rules(
    viewer: Any, operator: Any, norole: Any
) -> None:
    rule = AlertRule.objects.get(name="HCCS link loss")
    client = login(viewer)
    assert client.get("/api/alert-rules/").status_code == 200
    assert any(
        r["name"] == "HCCS link loss" for r in client.get("/api/alert-rules/").json()
    )
    assert post(client, "/api/alert-rules/", RULE).status_code == 403
    assert (
        post(
            login(operator), f"/api/alert-rules/{rule.pk}/", {"threshold": 1}, "patch"
        ).status_code
        == 403
    )
    assert login(operator).delete(f"/api/alert-rules/{rule.pk}/").status_code == 403
    assert login(norole).get("/api/alert-rules/").status_code == 403
    rule.refresh_from_db()
    assert rule.threshold == 15.0


def _firing_alert(cluster: Any) -> Alert:
    node = cluster.nodes.get(name="ascend-02")
    t0 = timezone.now()
    ingest(node, t0, roce_down=1)
    alerts_evaluate(now=t0)
    return Alert.objects.get(rule__name="RoCE NIC down")


def test_it_lists_filters_and_acknowledges_alerts(
    cluster: Any, viewer: Any, operator: Any
) -> None:
    alert = _firing_alert(cluster)
    rows = (
        login(viewer)
        .get("/api/alerts/?state=firing&severity=critical&cluster=qwen35-prod")
        .json()
    )
    assert [r["id"] for r in rows] == [alert.pk]
    assert login(viewer).get("/api/alerts/?severity=warning").json() == []
    assert login(viewer).get("/api/alerts/?state=burning").status_code == 400
    assert login(viewer).post(f"/api/alerts/{alert.pk}/ack/").status_code == 403
    response = login(operator).post(f"/api/alerts/{alert.pk}/ack/")
    assert response.status_code == 200 and response.json()["acknowledged_by"] == "otto"
    assert login(operator).post(f"/api/alerts/{alert.pk}/ack/").status_code == 409
    alert.refresh_from_db()
    assert alert.state == "acknowledged" and alert.acknowledged_by == operator
    assert (
        AuditEvent.objects.filter(
            action="alert.acknowledge", actor_name="otto", result="success"
        ).count()
        == 1
    )


def test_it_creates_silences_and_rejects_bad_ones(
    cluster: Any, operator: Any, viewer: Any
) -> None:
    alert = _firing_alert(cluster)
    ends = (timezone.now() + timedelta(hours=2)).isoformat()
    assert (
        post(
            login(viewer), "/api/silences/", {"target": "ascend-02", "ends_at": ends}
        ).status_code
        == 403
    )
    response = post(login(operator), "/api/silences/", {"ends_at": ends})
    assert response.status_code == 400 and "rule, target, cluster or matchers" in str(
        response.json()
    )
    past = (timezone.now() - timedelta(hours=1)).isoformat()
    response = post(
        login(operator), "/api/silences/", {"target": "ascend-02", "ends_at": past}
    )
    assert response.status_code == 400 and "ends_at" in response.json()
    assert (
        post(
            login(operator),
            "/api/silences/",
            {"target": "ascend-02", "ends_at": "soon"},
        ).status_code
        == 400
    )
    assert Silence.objects.count() == 0
    response = post(
        login(operator),
        "/api/silences/",
        {"rule": alert.rule_id, "matchers": {"node": "ascend-02"}, "ends_at": ends},
    )
    assert response.status_code == 201
    alert.refresh_from_db()
    assert alert.silenced
    assert AuditEvent.objects.filter(
        action="silence.create", actor_name="otto"
    ).exists()
