"""A node's server model: detected at preflight, overridable with a reason (audited), shown by the API."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from console.models import AuditEvent, Node
from console.selectors import node_link_fault_plan
from console.services.inventory import (
    node_server_model_detected,
    node_server_model_override,
)
from tests.conftest import login

DETECTED_800T = {
    "model": "atlas-800t-a2",
    "product_name": "Atlas 800T A2",
    "chip_family": "910B",
    "evidence": "SMBIOS product name 'Atlas 800T A2'; chip 910B3 (910B).",
}


def test_detection_is_stored_and_audited_when_it_changes(cluster: Any) -> None:
    node = Node.objects.get(name="ascend-03")
    assert (
        node.effective_server_model == "unknown" and node.server_model_source == "none"
    )
    node = node_server_model_detected(node=node, detection=DETECTED_800T)
    node_server_model_detected(node=node, detection=DETECTED_800T)
    node.refresh_from_db()
    assert node.detected_server_model == "atlas-800t-a2"
    assert node.effective_server_model_label == "Atlas 800T A2"
    assert "910B3" in node.detected_server_model_evidence
    assert node.detected_server_model_at is not None
    assert AuditEvent.objects.filter(action="node.server_model_detected").count() == 1


def test_an_override_needs_a_reason_and_is_audited(cluster: Any, admin: Any) -> None:
    node = Node.objects.get(name="ascend-03")
    with pytest.raises(ValidationError) as exc:
        node_server_model_override(
            node=node, model="atlas-200t-a2-box16", reason=" ", actor=admin
        )
    assert "server_model_override_reason" in exc.value.message_dict
    assert not AuditEvent.objects.filter(action="node.server_model_override").exists()
    with pytest.raises(ValidationError) as exc:
        node_server_model_override(
            node=node, model="atlas-9000", reason="x", actor=admin
        )
    assert "server_model_override" in exc.value.message_dict
    node = node_server_model_override(
        node=node,
        model="atlas-200t-a2-box16",
        reason="SMBIOS blank on this box",
        actor=admin,
    )
    assert node.effective_server_model == "atlas-200t-a2-box16"
    assert node.server_model_source == "override"
    row = AuditEvent.objects.get(action="node.server_model_override")
    assert (
        row.actor_name == admin.username
        and row.after["server_model_override"] == "atlas-200t-a2-box16"
    )
    node = node_server_model_override(node=node, model="", reason="", actor=admin)
    assert (
        node.server_model_override_reason == ""
        and node.effective_server_model == "unknown"
    )


def test_the_link_fault_plan_of_an_800t_a2_goes_to_a_same_model_spare(
    cluster: Any,
) -> None:
    for name in ("ascend-03", "ascend-07"):  # ascend-07 is the demo's idle spare
        node_server_model_detected(
            node=Node.objects.get(name=name), detection=DETECTED_800T
        )
    plan = node_link_fault_plan(Node.objects.get(name="ascend-03"), last_start_s=540.0)
    assert (
        plan["server_model_label"] == "Atlas 800T A2" and plan["source"] == "detected"
    )
    assert [(r["key"], r["can_work"]) for r in plan["remedies"]] == [
        ("replace_with_spare", "yes"),
        ("roce_failover", "no"),
        ("escalate", "yes"),
    ]
    assert plan["remedies"][0]["expected_downtime_s"] == 540.0
    assert any(
        "HCCL_INTRA_ROCE_ENABLE.md" in s for s in plan["remedies"][1]["source_text"]
    )
    # a spare of another model does not count
    node_server_model_detected(
        node=Node.objects.get(name="ascend-07"),
        detection={**DETECTED_800T, "model": "atlas-800i-a2"},
    )
    plan = node_link_fault_plan(Node.objects.get(name="ascend-03"))
    assert plan["remedies"][0]["can_work"] == "no"


def test_the_api_shows_the_model_and_refuses_an_override_without_reason(
    cluster: Any, admin: Any
) -> None:
    node = node_server_model_detected(
        node=Node.objects.get(name="ascend-02"), detection=DETECTED_800T
    )
    c = login(admin)
    body = c.get(f"/api/nodes/{node.name}/").json()
    assert body["detected_server_model"] == "atlas-800t-a2"
    assert body["effective_server_model"] == "atlas-800t-a2"
    assert body["effective_server_model_label"] == "Atlas 800T A2"
    assert body["server_model_source"] == "detected"
    resp = c.patch(
        f"/api/nodes/{node.name}/",
        {"server_model_override": "atlas-200t-a2-box16"},
        content_type="application/json",
    )
    assert resp.status_code == 400 and "server_model_override_reason" in resp.json()
    resp = c.patch(
        f"/api/nodes/{node.name}/",
        {"detected_server_model": "atlas-200t-a2-box16"},
        content_type="application/json",
    )
    node.refresh_from_db()
    assert node.detected_server_model == "atlas-800t-a2"  # preflight's, not writable


def test_the_node_partial_shows_the_model_and_each_remedy(cluster: Any) -> None:
    from django.template.loader import render_to_string

    node = node_server_model_detected(
        node=Node.objects.get(name="ascend-03"), detection=DETECTED_800T
    )
    html = render_to_string(
        "console/partials/_link_fault_plan.html",
        {"plan": node_link_fault_plan(node, last_start_s=540.0)},
    )
    assert 'data-server-model="atlas-800t-a2"' in html and "Atlas 800T A2" in html
    assert "detected at preflight" in html and "910B3" in html
    assert 'class="remedy remedy-no" data-remedy="roce_failover"' in html
    assert "cannot work here" in html and "HCCL_INTRA_ROCE_ENABLE.md" in html


def test_expected_downtime_is_the_clusters_last_measured_start(cluster: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from console.models import Operation
    from console.selectors import last_start_seconds

    assert last_start_seconds(cluster) is None
    now = timezone.now()
    Operation.objects.create(
        cluster=cluster,
        kind="start",
        state="succeeded",
        started_at=now - timedelta(seconds=700),
        finished_at=now - timedelta(seconds=100),
    )
    Operation.objects.create(
        cluster=cluster,
        kind="start",
        state="failed",
        started_at=now - timedelta(seconds=90),
        finished_at=now - timedelta(seconds=10),
    )
    assert last_start_seconds(cluster) == pytest.approx(600.0)
    plan = node_link_fault_plan(Node.objects.get(name="ascend-03"))
    assert all(
        r["expected_downtime_s"] == pytest.approx(600.0)
        for r in plan["remedies"]
        if r["restarts_engine"]
    )
