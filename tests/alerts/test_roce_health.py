"""One meaning of a healthy RoCE port for the RoCE alert and the failover precondition."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from monitoring.alerts.selectors import observations_collect
from monitoring.ingest import NodeResult, ingest_round
from monitoring.remediation import roce_evidence
from tests.monitoring.samples import agent_sample

pytestmark = pytest.mark.django_db


def test_init_is_healthy_for_both_and_a_failing_port_for_both(cluster: Any) -> None:
    node = cluster.nodes.get(name="ascend-03")
    sample = agent_sample(node.name)  # real hccn_tool output: net_health "Init"
    assert {p["net_health"] for p in sample["roce"]} == {"Init"}
    now = timezone.now()
    ingest_round(nodes=[NodeResult(node.pk, sample=sample)], scrapes=[], started_at=now)
    ok, evidence = roce_evidence(node)
    assert ok and evidence["roce_ports"] == 8 and evidence["roce_bad"] == []
    bad_health = [
        o
        for o in observations_collect(now=now)["nic.roce_down"]
        if o.node_id == node.pk
    ]
    assert bad_health and all(o.value == 0.0 for o in bad_health)

    sample["roce"][2]["net_health"] = "Socket fail"
    later = timezone.now()
    ingest_round(
        nodes=[NodeResult(node.pk, sample=sample)], scrapes=[], started_at=later
    )
    ok, evidence = roce_evidence(node)
    assert not ok and [p["npu"] for p in evidence["roce_bad"]] == [2]
    flagged = {
        o.target: o.value
        for o in observations_collect(now=later)["nic.roce_down"]
        if o.node_id == node.pk
    }
    assert [t for t, v in flagged.items() if v == 1.0] == [f"{node.name}/roce2"]
