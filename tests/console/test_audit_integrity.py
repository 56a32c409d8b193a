"""Audit rows cannot be forged or lost: the proxy's hop is the IP, the request id is bounded,
and a mutation commits with its audit row or not at all (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from console.models import AuditEvent, Cluster, Operation, OperationState

pytestmark = pytest.mark.django_db


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def start(user: Any, cluster: Cluster, **headers: str) -> Any:
    return api(user).post(
        f"/api/clusters/{cluster.name}/operations/",
        {"kind": "start"},
        format="json",
        **headers,
    )


@override_settings(TRUST_X_FORWARDED_FOR=True)
def test_it_takes_the_hop_the_proxy_appended_not_the_one_the_client_sent(
    cluster: Cluster, operator: Any
) -> None:
    # nginx's $proxy_add_x_forwarded_for appends the peer it saw after what the client sent
    answer = start(operator, cluster, HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7")
    assert answer.status_code == 201, answer.content
    assert AuditEvent.objects.get(action="operation.start").source_ip == "203.0.113.7"


@override_settings(TRUST_X_FORWARDED_FOR=True)
@pytest.mark.parametrize(
    "forwarded", ["not-an-ip", "1.2.3.4, <script>", "999.1.1.1", " , "]
)
def test_a_forwarded_for_that_is_no_ip_falls_back_to_the_peer(
    cluster: Cluster, operator: Any, forwarded: str
) -> None:
    answer = start(operator, cluster, HTTP_X_FORWARDED_FOR=forwarded)
    assert answer.status_code == 201, answer.content
    assert AuditEvent.objects.get(action="operation.start").source_ip == "127.0.0.1"


@pytest.mark.parametrize("request_id", ["r" * 65, "a b", "id\x7f", "x" * 5000])
def test_an_unusable_request_id_is_replaced_not_stored(
    cluster: Cluster, operator: Any, request_id: str
) -> None:
    answer = start(operator, cluster, HTTP_X_REQUEST_ID=request_id)
    assert answer.status_code == 201, answer.content
    row = AuditEvent.objects.get(action="operation.start")
    assert row.request_id != request_id and 0 < len(row.request_id) <= 64
    assert answer["X-Request-ID"] == row.request_id


def test_a_plain_request_id_is_kept(cluster: Cluster, operator: Any) -> None:
    start(operator, cluster, HTTP_X_REQUEST_ID="req-1234.abc:9")
    assert (
        AuditEvent.objects.get(action="operation.start").request_id == "req-1234.abc:9"
    )


class AuditDown(Exception):
    pass


def _audit_fails(*args: Any, **kwargs: Any) -> None:
    raise AuditDown("the audit table refused the row")


def test_a_start_whose_audit_row_fails_leaves_no_queued_operation(
    cluster: Cluster, operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.services import operations
    from console.services.operations import start

    monkeypatch.setattr(start, "audit_record", _audit_fails)
    with pytest.raises(AuditDown):
        operations.operation_start(cluster=cluster, kind="start", user=operator)
    assert not Operation.objects.exists()  # no orphan blocking the next start


def test_a_cancel_whose_audit_row_fails_is_not_applied(
    cluster: Cluster, operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.services import operations
    from console.services.operations import lifecycle

    op = operations.operation_start(cluster=cluster, kind="start", user=operator)
    monkeypatch.setattr(lifecycle, "audit_record", _audit_fails)
    with pytest.raises(AuditDown):
        operations.operation_cancel(operation=op, user=operator)
    op.refresh_from_db()
    assert op.state == OperationState.QUEUED and op.finished_at is None


def test_a_finish_whose_audit_row_fails_is_not_applied(
    cluster: Cluster, operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.services import operations
    from console.services.operations import lifecycle

    op = operations.operation_start(cluster=cluster, kind="start", user=operator)
    monkeypatch.setattr(lifecycle, "audit_record", _audit_fails)
    with pytest.raises(AuditDown):
        operations.operation_terminate(op, OperationState.FAILED, error="x")
    op.refresh_from_db()
    assert op.finished_at is None


def test_a_node_update_whose_audit_row_fails_is_not_saved(
    cluster: Cluster, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.services import inventory

    node = cluster.nodes.order_by("rank").first()
    monkeypatch.setattr(inventory, "audit_record", _audit_fails)
    with pytest.raises(AuditDown):
        inventory.node_update(node=node, actor=admin, hostname="changed")
    node.refresh_from_db()
    assert node.hostname != "changed"


def test_a_refused_acknowledge_keeps_its_audit_row(
    cluster: Cluster, operator: Any
) -> None:
    from django.utils import timezone

    from monitoring.alerts.services import alert_acknowledge, alert_rules_seed
    from monitoring.models.alerts import Alert, AlertRule

    alert_rules_seed()
    rule = AlertRule.objects.order_by("pk").first()
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule, cluster=cluster, target=cluster.name, state="resolved",
        severity=rule.severity, fault_onset_at=now, pending_at=now, fired_at=now,
    )  # fmt: skip
    with pytest.raises(ValueError, match="not firing|only a firing"):
        alert_acknowledge(alert=alert, user=operator)
    assert AuditEvent.objects.filter(
        action="alert.acknowledge", result="failure"
    ).exists()
