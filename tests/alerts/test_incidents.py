"""Incidents through the REST API and the pages: list, stats, timeline, approve / reject;
maintenance mode, manual failback and re-admission of a replaced node."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.models import (
    AuditEvent,
    Cluster,
    ClusterState,
    Node,
    NodeRole,
    NodeState,
    Operation,
)
from monitoring.alerts.incidents import incident_stats
from monitoring.models import Alert, AlertRule, Incident, IncidentState
from tests.alerts.helpers import ingest
from tests.conftest import login
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def ask_incident(cluster: Cluster) -> Incident:
    """A firing HCCS alert whose rule asks first, decided by the real remediation code."""
    from monitoring import remediation

    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    node = cluster.ranked_nodes()[2]
    rule = AlertRule.objects.get(name="Requests waiting")
    AlertRule.objects.filter(pk=rule.pk).update(
        remediation_policy="ask", remediation_action="restart"
    )
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        node=node,
        target=cluster.name,
        state="firing",
        severity=rule.severity,
        value=40.0,
        message="test",
        fault_onset_at=now - timedelta(seconds=7),
        pending_at=now,
        fired_at=now,
    )
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == IncidentState.AWAITING_APPROVAL
    return incident


def test_the_api_lists_an_incident_with_its_timeline_and_an_operator_approves_it(
    ask_incident: Incident, viewer: Any, operator: Any
) -> None:
    listed = api(viewer).get("/api/incidents/", {"state": "awaiting_approval"}).json()
    assert [i["id"] for i in listed] == [ask_incident.pk]
    assert (
        listed[0]["detection_s"] == pytest.approx(7.0, abs=0.01)
        and listed[0]["decision_s"] is None
    )
    detail = api(viewer).get(f"/api/incidents/{ask_incident.pk}/").json()
    kinds = [row["kind"] for row in detail["timeline"]]
    assert kinds[:2] == ["fault_onset", "detected"] and "decision:ask" in kinds
    # a viewer may look but not decide
    assert (
        api(viewer).post(f"/api/incidents/{ask_incident.pk}/approve/").status_code
        == 403
    )
    response = api(operator).post(f"/api/incidents/{ask_incident.pk}/approve/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "running" and body["approved_by"] == operator.username
    op = Operation.objects.get(pk=body["operations"][0])
    assert (
        op.kind == "restart"
        and op.requested_by == operator
        and op.incidents.get() == ask_incident
        and "incident" not in op.params
    )
    assert "decision:approve" in [row["kind"] for row in body["timeline"]]
    again = api(operator).post(f"/api/incidents/{ask_incident.pk}/approve/")
    assert (
        again.status_code == 409 and "not awaiting approval" in again.json()["detail"]
    )
    assert AuditEvent.objects.filter(
        action="remediation.approve", actor=operator
    ).exists()


def test_a_rejected_incident_does_nothing_and_the_page_shows_no_buttons_afterwards(
    ask_incident: Incident, operator: Any, viewer: Any
) -> None:
    page = login(operator).get(f"/alerts/incidents/{ask_incident.pk}/")
    assert page.status_code == 200 and b'id="incident-decide"' in page.content
    assert (
        b'id="incident-decide"'
        not in login(viewer).get(f"/alerts/incidents/{ask_incident.pk}/").content
    )
    response = login(operator).post(
        f"/alerts/incidents/{ask_incident.pk}/decide", {"decision": "reject"}
    )
    assert response.status_code == 302
    ask_incident.refresh_from_db()
    assert (
        ask_incident.state == IncidentState.REJECTED
        and ask_incident.operation_ids == []
    )
    assert not Operation.objects.filter(cluster=ask_incident.cluster).exists()
    page = login(operator).get(f"/alerts/incidents/{ask_incident.pk}/")
    assert (
        b'id="incident-decide"' not in page.content
        # the decision as the zh-Hans reader reads it (monitoring/opstext.py)
        and f"由 {operator.username} 拒绝".encode() in page.content
    )
    assert (
        api(operator).post(f"/api/incidents/{ask_incident.pk}/reject/").status_code
        == 409
    )


def test_approving_from_the_page_opens_the_operation(
    ask_incident: Incident, operator: Any
) -> None:
    response = login(operator).post(
        f"/alerts/incidents/{ask_incident.pk}/decide", {"decision": "approve"}
    )
    op = Operation.objects.get(cluster=ask_incident.cluster)
    assert (
        response.status_code == 302 and response["Location"] == f"/operations/{op.pk}/"
    )


def _incident(
    cluster: Cluster,
    onset: Any,
    *,
    detect_s: float,
    decide_s: float | None,
    mttr_s: float | None,
    state: str = "recovered",
) -> Incident:
    rule = AlertRule.objects.get(name="HCCS link loss")
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        target=f"n{Alert.objects.count()}",
        state="resolved",
        severity="warning",
        fault_onset_at=onset,
        pending_at=onset,
    )
    return Incident.objects.create(
        alert=alert,
        cluster=cluster,
        action="failover",
        policy="auto",
        state=state,
        fault_onset_at=onset,
        detected_at=onset + timedelta(seconds=detect_s),
        operation_started_at=onset + timedelta(seconds=detect_s + decide_s)
        if decide_s is not None
        else None,
        resolved_at=onset + timedelta(seconds=mttr_s) if mttr_s is not None else None,
    )


def test_stats_give_nearest_rank_percentiles_and_a_histogram(
    cluster: Cluster, viewer: Any
) -> None:
    t0 = timezone.now()
    for k, detect in enumerate([1.0, 2.0, 3.0, 4.0, 40.0]):
        _incident(
            cluster,
            t0 + timedelta(minutes=k),
            detect_s=detect,
            decide_s=0.5,
            mttr_s=detect * 10,
        )
    _incident(
        cluster, t0, detect_s=2.0, decide_s=None, mttr_s=None, state="skipped"
    )  # left out: it did not act
    stats = api(viewer).get("/api/incidents/stats/").json()
    assert stats["count"] == 5 and stats["manual_reference_s"] == 180
    assert stats["detection"]["p50"] == 3.0 and stats["detection"]["p95"] == 40.0
    assert stats["decision"]["p50"] == 0.5
    # buckets ≤5, ≤10, ≤30, ≤60, ≤180, ≤600, ≤1800, >1800
    assert stats["detection"]["histogram"] == [4, 0, 0, 1, 0, 0, 0, 0]
    assert stats["mttr"]["histogram"] == [0, 1, 2, 1, 0, 1, 0, 0]
    assert incident_stats([])["detection"] == {
        "n": 0,
        "p50": None,
        "p95": None,
        "histogram": [0] * 8,
    }
    page = login(viewer).get("/alerts/incidents/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="incident-histogram"' in text and 'data-series="detection"' in text
    assert page.context["stats"]["detection"]["p95"] == 40.0
    assert len(page.context["incidents"]) == 6  # the table shows the skipped one too


def test_bad_filters_are_refused_naming_the_field(viewer: Any) -> None:
    response = api(viewer).get("/api/incidents/", {"state": "exploded"})
    assert response.status_code == 400 and "state" in response.json()
    response = api(viewer).get("/api/incidents/", {"action": "reboot"})
    assert response.status_code == 400 and "action" in response.json()


def test_maintenance_mode_is_switched_by_an_operator_and_audited(
    cluster: Cluster, operator: Any, viewer: Any
) -> None:
    assert (
        api(viewer)
        .post(
            f"/api/clusters/{cluster.name}/maintenance/",
            {"maintenance_mode": True},
            format="json",
        )
        .status_code
        == 403
    )
    bad = api(operator).post(
        f"/api/clusters/{cluster.name}/maintenance/",
        {"maintenance_mode": "perhaps"},
        format="json",
    )
    assert bad.status_code == 400 and "maintenance_mode" in bad.json()
    cluster.refresh_from_db()
    assert cluster.maintenance_mode is False  # nothing half-applied
    ok = api(operator).post(
        f"/api/clusters/{cluster.name}/maintenance/",
        {"maintenance_mode": True, "reason": "NIC swap"},
        format="json",
    )
    assert ok.status_code == 200 and ok.json()["maintenance_mode"] is True
    event = AuditEvent.objects.get(action="cluster.maintenance")
    assert (
        event.actor == operator
        and event.after == {"maintenance_mode": True}
        and event.message == "NIC swap"
    )
    page = login(operator).get(f"/clusters/{cluster.name}/")
    assert b'value="off"' in page.content  # the switch now offers to end it
    login(operator).post(
        f"/clusters/{cluster.name}/maintenance/", {"maintenance_mode": "off"}
    )
    cluster.refresh_from_db()
    assert cluster.maintenance_mode is False


def test_failback_is_a_manual_failover_back_to_hccs_with_the_evidence(
    cluster: Cluster, operator: Any, viewer: Any
) -> None:
    refused = api(operator).post(
        f"/api/clusters/{cluster.name}/failback/", {}, format="json"
    )
    assert (
        refused.status_code == 409
        and "nothing to fail back" in refused.json()["detail"]
    )
    node = cluster.ranked_nodes()[2]
    t0 = timezone.now()
    ingest(
        node, t0
    )  # real samples through the ingest path: the evidence reads what it stores
    ingest(node, t0 + timedelta(seconds=5), advance={0: (1000, 10, 0)})
    Node.objects.filter(pk=node.pk).update(
        link_mode="roce",
        link_mode_since=timezone.now(),
        link_mode_reason="HCCS loss 20 %",
    )
    evidence = (
        api(viewer).get(f"/api/clusters/{cluster.name}/failback/").json()["nodes"]
    )
    assert [e["node"] for e in evidence] == [node.name] and evidence[0][
        "reason"
    ] == "HCCS loss 20 %"
    assert (
        evidence[0]["hccs_loss_pct"] == pytest.approx(1.0)
        and evidence[0]["unhealthy_links"] == []
    )
    page = login(operator).get(f"/clusters/{cluster.name}/")
    assert b'id="failback-form"' in page.content and b"HCCS loss 20 %" in page.content
    assert (
        api(viewer)
        .post(f"/api/clusters/{cluster.name}/failback/", {}, format="json")
        .status_code
        == 403
    )
    created = api(operator).post(
        f"/api/clusters/{cluster.name}/failback/",
        {"reason": "cable replaced"},
        format="json",
    )
    assert created.status_code == 201, created.content
    op = Operation.objects.get(pk=created.json()["id"])
    assert (
        op.kind == "failover"
        # every rank gets the HCCS pair, not only the node that was on RoCE
        and op.params["link_modes"] == {n.name: "hccs" for n in cluster.ranked_nodes()}
        and op.reason == "cable replaced"
    )
    assert (
        op.params["failback"][0]["node"] == node.name
    )  # the evidence shown, kept with the operation
    assert AuditEvent.objects.filter(
        action="operation.failover", actor=operator
    ).exists()


def _out_of_service(name: str) -> Node:
    cluster = make_cluster(name=name, nodes=1)
    node = cluster.ranked_nodes()[0]
    node.management_ip = "127.0.0.1"
    node.save()
    Node.objects.filter(pk=node.pk).update(
        cluster=None,
        rank=None,
        role=NodeRole.SPARE,
        state=NodeState.OUT_OF_SERVICE,
        link_mode_reason="replaced by spare-1 (operation #7)",
    )
    node.refresh_from_db()
    return node


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_readmission_runs_the_preflight_and_refuses_a_failing_node(
    tmp_path: Path,
) -> None:
    from console.services.agents import agent_call
    from tests.agents import agent_worker
    from tests.factories import make_user
    from tests.integration.test_agent import FAST_SIM

    node = _out_of_service("readmit")
    ops = make_user("rita", "operator")
    in_service = make_cluster(name="busy", nodes=1).ranked_nodes()[0]
    response = api(ops).post(f"/api/nodes/{in_service.name}/readmit/")
    assert (
        response.status_code == 409
        and "not out of service" in response.json()["detail"]
    )
    env = {
        **FAST_SIM,
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": ",".join(f"127.10.97.{i + 1}" for i in range(8)),
    }
    with agent_worker(node.name, extra_env=env):
        agent_call(node.name, "sim.inject", fault="roce-down")
        refused = api(ops).post(f"/api/nodes/{node.name}/readmit/")
        assert refused.status_code == 409, refused.content
        body = refused.json()
        assert "preflight failed" in body["detail"] and any(
            c["status"] == "fail" for c in body["checks"]
        )
        node.refresh_from_db()
        assert node.state == NodeState.OUT_OF_SERVICE  # nothing changed
        agent_call(node.name, "sim.clear")
        ok = api(ops).post(f"/api/nodes/{node.name}/readmit/")
        assert ok.status_code == 200, ok.content
        assert ok.json()["state"] == "ready" and ok.json()["checks"]
    node.refresh_from_db()
    assert (node.state, node.role, node.cluster_id, node.link_mode) == (
        "ready",
        "spare",
        None,
        "hccs",
    )
    results = list(
        AuditEvent.objects.filter(action="node.readmit", target_id=str(node.pk))
        .order_by("pk")
        .values_list("result", flat=True)
    )
    assert results == ["failure", "success"]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_readmission_checks_again_the_links_that_failed(
    tmp_path: Path, settings: Any
) -> None:
    """An idle node carries no HCCS traffic: the links recorded as failing cannot be
    measured, which is not a pass. The operator accepts them with a reason (audited)."""
    from console.services.agents import agent_call
    from tests.agents import agent_worker
    from tests.factories import make_user
    from tests.integration.test_agent import FAST_SIM

    settings.FAILOVER_VERIFY_S = 0.3
    node = _out_of_service("relink")
    Node.objects.filter(pk=node.pk).update(
        failed_links=[[2, 0, 3], [2, 0, 4]],
        failed_links_evidence={"operation": 7, "threshold_pct": 15.0},
    )
    node.refresh_from_db()
    ops = make_user("lena", "operator")
    env = {
        **FAST_SIM,
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": ",".join(f"127.10.98.{i + 1}" for i in range(8)),
    }
    with agent_worker(node.name, extra_env=env):
        refused = api(ops).post(f"/api/nodes/{node.name}/readmit/")
        assert refused.status_code == 409, refused.content
        detail = refused.json()["detail"]
        assert "NPU 2 chip 0 link 3, NPU 2 chip 0 link 4" in detail, detail
        assert "cannot be checked" in detail and "no traffic" in detail, detail
        node.refresh_from_db()
        assert node.state == NodeState.OUT_OF_SERVICE and node.failed_links
        # counters unsupported on the node: still "cannot verify", never a pass
        agent_call(node.name, "sim.inject", fault="hccs-unsupported")
        refused = api(ops).post(f"/api/nodes/{node.name}/readmit/")
        assert refused.status_code == 409
        assert "unsupported or missing" in refused.json()["detail"]
        agent_call(node.name, "sim.clear")
        ok = api(ops).post(
            f"/api/nodes/{node.name}/readmit/",
            {"accept_unverified_links": "HCCS module reseated; hccl_test clean"},
            format="json",
        )
        assert ok.status_code == 200, ok.content
        assert ok.json()["links"]["status"] == "cannot_verify"
    node.refresh_from_db()
    assert node.state == NodeState.READY and node.failed_links == []
    event = AuditEvent.objects.filter(
        action="node.readmit", target_id=str(node.pk), result="success"
    ).get()
    assert event.after["links"]["accepted_unverified"] == (
        "HCCS module reseated; hccl_test clean"
    )
    assert (
        AuditEvent.objects.filter(
            action="node.readmit", target_id=str(node.pk), result="failure"
        ).count()
        == 2
    )


def test_an_out_of_service_spare_shows_a_readmit_button_to_operators(
    operator: Any, viewer: Any
) -> None:
    node = _out_of_service("oos")
    page = login(operator).get("/")
    assert (
        f'id="readmit-{node.name}"'.encode() in page.content
        and "已被 spare-1 替换".encode()
        in page.content  # "replaced by spare-1 …" in zh-Hans
    )
    assert f'id="readmit-{node.name}"'.encode() not in Client().get("/").content
    assert f'id="readmit-{node.name}"'.encode() not in login(viewer).get("/").content


def test_the_incident_pages_speak_chinese_by_default(
    ask_incident: Incident, operator: Any
) -> None:
    client = login(operator)
    listing = client.get("/alerts/incidents/").content.decode()
    assert "检测与恢复" in listing and "人工诊断约需 180 秒" in listing
    detail = client.get(f"/alerts/incidents/{ask_incident.pk}/").content.decode()
    assert (
        "批准" in detail and "拒绝" in detail and "故障开始（首个异常采样）" in detail
    )


def test_a_cancelled_operation_stands_automation_down(
    ask_incident: Incident, operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from console.services.operations import operation_cancel
    from monitoring import remediation

    op = remediation.incident_approve(incident=ask_incident, user=operator)
    assert op is not None and op.state == "queued"
    with django_capture_on_commit_callbacks(
        execute=True
    ):  # finishing announces on commit
        operation_cancel(operation=op, user=operator)
    ask_incident.refresh_from_db()
    assert (
        ask_incident.state == IncidentState.SKIPPED
        and f"cancelled by {operator.username}" in ask_incident.summary
    )
    assert (
        Operation.objects.filter(cluster=ask_incident.cluster).count() == 1
    )  # nothing retried behind the operator's back


def test_an_interrupted_operation_escalates_instead_of_retrying(
    ask_incident: Incident,
    operator: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from console.services.operations import operation_reap_interrupted
    from monitoring import remediation

    op = remediation.incident_approve(incident=ask_incident, user=operator)
    assert op is not None
    Operation.objects.filter(pk=op.pk).update(
        created_at=timezone.now()
        - timedelta(seconds=settings.OPERATION_QUEUE_STALE_S + 5)
    )
    with django_capture_on_commit_callbacks(
        execute=True
    ):  # finishing announces on commit
        assert operation_reap_interrupted() == [op.pk]
    ask_incident.refresh_from_db()
    assert (
        ask_incident.state == IncidentState.ESCALATED
        and "interrupted" in ask_incident.summary
    )
    alert = ask_incident.alert
    alert.refresh_from_db()
    assert alert.severity == "critical" and alert.message.startswith("ESCALATED")
    assert Operation.objects.filter(cluster=ask_incident.cluster).count() == 1


def test_a_cannot_verify_verdict_is_not_a_pass_and_takes_the_next_remedy_or_escalates(
    cluster: Cluster, operator: Any
) -> None:
    from monitoring import remediation

    node = cluster.ranked_nodes()[2]
    # a Box16 engine (the RoCE failover can work there; it ran and could not be verified)
    cluster.nodes.update(detected_server_model="atlas-200t-a2-box16")
    rule = AlertRule.objects.get(name="HCCS link loss")
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        node=node,
        target=node.name,
        state="firing",
        severity="warning",
        fault_onset_at=now,
        pending_at=now,
        fired_at=now,
    )
    op = Operation.objects.create(
        cluster=cluster,
        kind="failover",
        state="succeeded",
        started_at=now,
        finished_at=now + timedelta(seconds=8),
        result={
            "verification": {
                "ok": False,
                "status": "cannot_verify",
                "reason": "Cannot verify the switch: npu-smi info -t hccs is unsupported",
                "evidence": {"hccs_pps_before": None, "hccs_pps_after": None},
                "node": node.name,
                "window_s": 4.0,
                "detail": "Cannot verify the switch: npu-smi info -t hccs is unsupported",
            }
        },
    )
    incident = Incident.objects.create(
        alert=alert,
        cluster=cluster,
        node=node,
        action="failover",
        policy="auto",
        state="running",
        fault_onset_at=now,
        detected_at=now,
        operation_ids=[op.pk],
        operation=op,
    )
    remediation.operation_finished(op.pk)
    incident.refresh_from_db()
    # never RECOVERED on it: the next remedy that can work here (the demo's spare) runs
    assert incident.state == IncidentState.RUNNING and incident.action == "replace"
    assert incident.healthy_at is not None  # the engine itself came back
    said = [e.message for e in alert.events.all() if e.data.get("decision") == "verify"]
    assert said and "cannot be verified" in said[0] and "next remedy" in said[0]
    chose = [e for e in alert.events.all() if e.data.get("decision") == "remedy"]
    assert chose and chose[0].data["chosen"] == "replace_with_spare"
    assert chose[0].data["tried"] == ["roce_failover"]
    (replace,) = Operation.objects.filter(kind="replace")
    assert replace.params["node"] == node.name and incident.operation_id == replace.pk
    page = login(operator).get(f"/alerts/incidents/{incident.pk}/").content.decode()
    assert "无法验证切换——这不算通过" in page  # the UI default is zh-Hans
    # the options as stated before the spare ran: each remedy, can it work here, downtime
    assert 'class="remedy-statement small"' in page
    assert (
        "服务器型号：Atlas 200T A2 Box16。" in page
    )  # "Server model: …" for a zh-Hans reader
    assert "2. replace_with_spare — 在此可行：是；预计停机" in page


def test_the_migration_links_each_incident_to_its_latest_operation_from_the_old_json_key(
    cluster: Cluster,
) -> None:
    from importlib import import_module

    from django.apps import apps

    migration = import_module("monitoring.migrations.0006_incident_operation_fk")
    rule = AlertRule.objects.get(name="HCCS link loss")
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        target=cluster.name,
        state="firing",
        severity="warning",
        fault_onset_at=now,
        pending_at=now,
        fired_at=now,
    )
    incident = Incident.objects.create(
        alert=alert,
        cluster=cluster,
        action="failover",
        policy="auto",
        state="running",
        fault_onset_at=now,
        detected_at=now,
    )
    ops = [
        Operation.objects.create(
            cluster=cluster,
            kind=kind,
            state="failed",
            finished_at=now,
            params={"incident": incident.pk, "verify_node": "n2"},
        )
        for kind in ("failover", "replace")
    ]
    Incident.objects.filter(pk=incident.pk).update(operation_ids=[o.pk for o in ops])
    migration.link_from_params(apps, None)
    incident.refresh_from_db()
    assert incident.operation_id == ops[-1].pk  # the latest one moves the incident on
    assert [Operation.objects.get(pk=o.pk).params for o in ops] == [
        {"verify_node": "n2"}
    ] * 2
    migration.params_from_link(apps, None)  # and back
    assert all(
        Operation.objects.get(pk=o.pk).params["incident"] == incident.pk for o in ops
    )
