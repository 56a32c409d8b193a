"""Issue 19 end to end: a rank crashes while serving → the incident carries a bundle from
every node, the diagnosis names the crashed rank's fault first, the tar downloads.

Real control worker, real node agents, real sim engines, real Redis (as test_remediation).
"""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from console.models import Cluster, EvidenceBundle, Operation, OperationState
from console.services.agents import agent_call
from console.services.operations import operation_start
from monitoring.models import Alert, Incident, IncidentState
from tests.agents import agents, control_worker
from tests.alerts.test_remediation import (  # noqa: F401 -- the fixture
    CONTROL_ENV,
    rounds_until,
    running,
    wait_incident,
)
from tests.conftest import login
from tests.factories import make_cluster, make_user
from tests.integration.test_operations import FAST, wait_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_bundle(timeout: float = 60, **filters: object) -> EvidenceBundle:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        bundle = EvidenceBundle.objects.filter(**filters).first()
        if bundle is not None:
            return bundle
        time.sleep(0.3)
    raise AssertionError(f"no evidence bundle with {filters} after {timeout}s")


def test_a_rank_crash_while_serving_leaves_a_bundle_naming_its_fault_first(
    running: tuple[Cluster, Path],  # noqa: F811 -- the imported fixture
) -> None:
    cluster, _ = running
    nodes = cluster.ranked_nodes()
    crashed = nodes[2]  # "ascend-03" of the demo
    assert agent_call(crashed, "sim.inject", fault="crash", value="once")[
        "killed_engine"
    ]
    rounds_until(
        lambda: Alert.objects.filter(
            rule__name="Engine process failed", target=crashed.name, state="firing"
        ).first(),
        rounds=4,
    )
    # the exit may have fired "Engine health failing" first; that incident is the one
    incident, _ = rounds_until(
        lambda: Incident.objects.filter(cluster=cluster).order_by("pk").first(),
        rounds=3,
    )
    # the incident finds its evidence through its operations (Incident.operation_ids)
    deadline = time.monotonic() + 90
    bundle = None
    while bundle is None and time.monotonic() < deadline:
        incident.refresh_from_db()
        bundle = EvidenceBundle.objects.filter(
            operation_id__in=incident.operation_ids
        ).first()
        if bundle is None:
            time.sleep(0.3)
    assert bundle is not None, f"no evidence bundle for incident {incident.pk}"
    # collected before the remedy restarted anything, from all four nodes
    incident.refresh_from_db()
    # taken when the exit was noticed (or, failing that, before the remedy), and tied
    # to the incident and its restart before anything was restarted
    assert bundle.trigger in ("engine_exited", "remedy")
    assert bundle.operation_id in incident.operation_ids
    assert [n["node"] for n in bundle.nodes] == [n.name for n in nodes]
    assert all(n["ok"] for n in bundle.nodes), bundle.nodes
    first = bundle.first_finding
    assert first is not None and first["node"] == crashed.name, bundle.findings
    assert first["id"] == "RT507015" and first["file"].startswith(
        ("plog/", "engine.log")
    )
    later = [f for f in bundle.findings if not f["first"]]
    assert any(f["node"] == nodes[0].name and f["id"] == "ENGINE_DEAD" for f in later)
    assert bundle.findings[0]["first"]  # earliest first, and it is the first fault

    operator = make_user("ivy", "operator")
    page = (
        login(operator)
        .get(reverse("incident-detail", args=[incident.pk]))
        .content.decode()
    )
    assert "first-fault" in page and crashed.name in page and "RT507015" in page
    got = login(operator).get(f"/evidence/{bundle.pk}/download/")
    assert got.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(got.content), mode="r:gz") as tar:
        names = tar.getnames()
    for node in nodes:
        assert any(name.endswith(f"/{node.name}/engine.log") for name in names)
        assert any(name.endswith(f"/{node.name}/npu-smi-info.txt") for name in names)
    assert any(f"/{crashed.name}/plog/plog-" in name for name in names)
    assert (
        login(make_user("vic", "viewer"))
        .get(f"/evidence/{bundle.pk}/download/")
        .status_code
        == 403
    )
    wait_incident(
        incident.pk, (IncidentState.RECOVERED, IncidentState.ESCALATED), timeout=240
    )


def test_a_failed_start_keeps_every_nodes_evidence_before_the_rollback(
    tmp_path: Path,
) -> None:
    cluster = make_cluster("evs", nodes=4, free_ports=True)
    nodes = cluster.ranked_nodes()
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path)}
    with agents(
        [n.name for n in nodes],
        extra_env=env,
        npu_ips={n.name: n.npu_ips for n in nodes},
    ):
        agent_call(nodes[2], "sim.inject", fault="crash", value="always")
        with control_worker(CONTROL_ENV):
            op = wait_op(
                operation_start(
                    cluster=cluster, kind="start", user=make_user("oscar", "operator")
                )
            )
    assert op.state == OperationState.FAILED
    bundle = EvidenceBundle.objects.get(operation=op)
    assert bundle.trigger == "operation_failed" and len(bundle.nodes) == 4
    first = bundle.first_finding

    # the sim's crash on start is a real HCCL init failure (ERR02200, error code 1)
    assert (
        first is not None
        and first["node"] == nodes[2].name
        and first["id"] == "ERR02200"
    )
    assert Operation.objects.get(pk=op.pk).evidence_bundles.count() == 1
    assert Client().get(f"/evidence/{bundle.pk}/download/").status_code == 302
