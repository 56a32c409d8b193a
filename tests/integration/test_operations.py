"""Operations end to end: real control worker, real node agents, real sim engines, real Redis."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from console.engine_auth import engine_headers
from console.models import (
    AuditEvent,
    Cluster,
    ClusterState,
    Node,
    Operation,
    OperationState,
)
from console.services.agents import agent_call
from console.services.operations import (
    OperationRefused,
    operation_reap_interrupted,
    operation_start,
)
from engine.sim.state import load_config, node_dir, save_config
from tests.agents import agents, control_worker, sim_engines
from tests.factories import make_cluster, make_profile, make_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
FAST = {"SIM_TIME_SCALE": "0.05", "SIM_LOAD_S": "0.3"}
CONTROL_ENV = {
    "WARMUP_REQUESTS": "12",
    "ENGINE_HEALTH_TIMEOUT_S": "60",
    "DRAIN_TIMEOUT_S": "5",
    "OPERATION_HEARTBEAT_S": "1",
}


def wait_op(op: Operation, timeout: float = 120) -> Operation:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op.refresh_from_db()
        if op.finished_at is not None:
            return op
        time.sleep(0.25)
    raise AssertionError(
        f"operation #{op.pk} still {op.state} after {timeout}s: {[(s.name, s.state) for s in op.steps.all()]}"
    )


def watch_op(op: Operation, timeout: float = 180) -> tuple[Operation, list[str]]:
    """Wait for ``op`` to end; return it with every step summary seen while it ran
    (what the operation page showed, polled every 50 ms)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op.refresh_from_db()
        seen += [s.summary for s in op.steps.all() if s.summary]
        if op.finished_at is not None:
            break
        time.sleep(0.05)
    return wait_op(op), seen


@pytest.fixture
def sim_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    """A 4-node sim cluster (DP4 × TP8 + EP, BF16 397B) with one real agent per node."""
    cluster = make_cluster("ops", nodes=4, free_ports=True)
    nodes = cluster.ranked_nodes()
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path)}
    with agents(
        [n.name for n in nodes],
        extra_env=env,
        npu_ips={n.name: n.npu_ips for n in nodes},
    ):
        yield cluster, tmp_path


def steps_by_name(op: Operation) -> dict[str, Any]:
    return {s.name: s for s in op.steps.all()}


def test_it_starts_in_rank_order_and_stops_in_reverse(
    sim_cluster: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = sim_cluster
    operator = make_user("olivia", "operator")
    nodes = cluster.ranked_nodes()
    with control_worker(CONTROL_ENV):
        op = wait_op(
            operation_start(cluster=cluster, kind="start", user=operator, reason="test")
        )
        assert op.state == OperationState.SUCCEEDED, op.error
        steps = steps_by_name(op)
        started = [
            steps[f"Start rank {n.rank} on {n.name}"].data["started_at"] for n in nodes
        ]
        assert (
            started == sorted(started) and len(set(started)) == 4
        )  # agent-side clocks: 0, 1, 2, 3
        assert steps["Head /health answers 200 (all ranks joined)"].summary.startswith(
            "/health 200, 4/4"
        )
        assert "words" in steps["Smoke test: one completion"].summary
        warm = steps["Warm-up requests"]
        assert (warm.progress_done, warm.progress_total) == (
            12,
            12,
        ) and warm.summary == "12 requests, 0 failed"
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.RUNNING
        assert agent_call(nodes[0], "engine.status")["health"] == 200
        assert len(sim_engines(state_dir)) >= 4
        # the engine requires the cluster's key (the smoke test and warm-up sent it)
        head = f"http://{nodes[0].management_ip}:{nodes[0].api_port}"
        assert httpx.get(f"{head}/v1/models", timeout=5).status_code == 401
        assert (
            httpx.get(
                f"{head}/v1/models", headers=engine_headers(cluster.name), timeout=5
            ).status_code
            == 200
        )

        stop = wait_op(operation_start(cluster=cluster, kind="stop", user=operator))
        assert stop.state == OperationState.SUCCEEDED, stop.error
        steps = steps_by_name(stop)
        stopped = [
            steps[f"Stop rank {n.rank} on {n.name}"].data["stopped_at"]
            for n in reversed(nodes)
        ]
        assert stopped == sorted(stopped)  # 3, 2, 1, 0
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.STOPPED
    assert sim_engines(state_dir) == []
    assert AuditEvent.objects.filter(
        action="operation.start", actor_name="olivia"
    ).exists()
    assert AuditEvent.objects.filter(
        action="operation.start.finish", result="success"
    ).exists()


def test_it_rolls_back_when_a_rank_fails_to_start(
    sim_cluster: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = sim_cluster
    nodes = cluster.ranked_nodes()
    agent_call(nodes[2], "sim.inject", fault="crash", value="always")
    with control_worker(CONTROL_ENV):
        op = wait_op(
            operation_start(
                cluster=cluster, kind="start", user=make_user("oscar", "operator")
            )
        )
    assert op.state == OperationState.FAILED
    steps = steps_by_name(op)
    failed = steps[f"Start rank 2 on {nodes[2].name}"]
    assert failed.state == "failed"
    assert failed.log_tail and failed.diagnosis, (
        failed.summary
    )  # the engine's last lines and what they mean
    assert steps[f"Start rank 0 on {nodes[0].name}"].state == "rolled_back"
    assert steps[f"Start rank 1 on {nodes[1].name}"].state == "rolled_back"
    assert steps[f"Start rank 3 on {nodes[3].name}"].state == "skipped"
    assert (
        "stopped" in steps["Roll back: stop the ranks this operation started"].summary
    )
    for node in nodes[:2]:
        assert agent_call(node, "engine.status")["state"] != "running"
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.STOPPED
    assert sim_engines(state_dir) == []


def test_a_stop_that_cannot_confirm_a_rank_down_leaves_the_cluster_failed(
    sim_cluster: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = sim_cluster
    operator = make_user("omar", "operator")
    n0, n1, n2, n3 = cluster.ranked_nodes()
    with control_worker({**CONTROL_ENV, "ENGINE_STOP_TIMEOUT_S": "4"}):
        op = wait_op(operation_start(cluster=cluster, kind="start", user=operator))
        assert op.state == OperationState.SUCCEEDED, op.error
        with pytest.raises(OperationRefused) as refused:  # it would kill them undrained
            operation_start(cluster=cluster, kind="start", user=operator)
        assert refused.value.field == "kind"
        agent_call(n1, "sim.inject", fault="agent-stop")  # rank 1's agent goes silent
        stop = wait_op(operation_start(cluster=cluster, kind="stop", user=operator))
        assert stop.state == OperationState.FAILED and n1.name in stop.error
        steps = steps_by_name(stop)
        assert steps[f"Stop rank 1 on {n1.name}"].state == "failed"
        assert steps[f"Stop rank 0 on {n0.name}"].state == "succeeded"  # kept going
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.FAILED  # not "Stopped": rank 1 may run on
        agent_call(n1, "sim.clear")
        again = wait_op(operation_start(cluster=cluster, kind="stop", user=operator))
        assert again.state == OperationState.SUCCEEDED, again.error
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.STOPPED
    assert sim_engines(state_dir) == []


def test_it_catches_preflight_problems_naming_node_and_fix(
    sim_cluster: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = sim_cluster
    n0, n1, n2, n3 = cluster.ranked_nodes()
    agent_call(n1, "sim.inject", fault="agent-stop")
    agent_call(n2, "sim.inject", fault="roce-down")
    cfg = load_config(node_dir(n3.name, base=state_dir))
    cfg.versions["vllm"] = "0.22.0"
    save_config(node_dir(n3.name, base=state_dir), cfg)
    wrong = [*n3.npu_ips[:5], "127.20.99.6", *n3.npu_ips[6:]]  # NPU 5 typed wrong
    Node.objects.filter(pk=n3.pk).update(npu_ips=wrong)
    with control_worker({**CONTROL_ENV, "PREFLIGHT_REACH_TIMEOUT_S": "4"}):
        op = wait_op(operation_start(cluster=cluster, kind="preflight"))
    assert op.state == OperationState.FAILED
    table = op.result["preflight"]["nodes"]
    reach = {c["name"]: c for c in table[n1.name]}["agent reachable"]
    assert reach["status"] == "fail" and f"node.{n1.name}" in reach["fix"]
    link = {c["name"]: c for c in table[n2.name]}["hccn link"]
    assert (
        link["status"] == "fail"
        and "DOWN" in link["evidence"]
        and "optical" in link["fix"]
    )
    version = {c["name"]: c for c in table[n3.name]}["vllm version"]
    assert (
        version["status"] == "fail"
        and "0.22.0" in version["evidence"]
        and n3.name in version["evidence"]
    )
    ips = {c["name"]: c for c in table[n3.name]}["npu ips match the inventory"]
    assert ips["status"] == "fail" and ips["evidence"] == (
        f"NPU 5: inventory 127.20.99.6, NIC {n3.npu_ips[5]}"
    )
    assert all(c["status"] == "pass" for c in table[n0.name] if c["name"] != "npu ping")
    assert {c["name"]: c for c in table[n0.name]}["npu ips match the inventory"][
        "status"
    ] == "pass"
    agent_call(n1, "sim.clear")


def test_it_refuses_a_plan_that_does_not_fit(tmp_path: Path) -> None:
    profile = make_profile(name="bf16 on two", data_parallel_size=2)
    cluster = make_cluster("small", nodes=2, profile=profile, free_ports=True)
    nodes = cluster.ranked_nodes()
    with agents(
        [n.name for n in nodes],
        extra_env={**FAST, "SIM_STATE_DIR": str(tmp_path)},
        npu_ips={n.name: n.npu_ips for n in nodes},
    ):
        with control_worker(CONTROL_ENV):
            op = wait_op(operation_start(cluster=cluster, kind="start"))
    assert op.state == OperationState.FAILED
    plan_step = steps_by_name(op)["Launch plan valid and fits in HBM"]
    assert plan_step.state == "failed" and "GiB" in plan_step.summary, plan_step.summary
    assert "preflight failed" in op.error
    assert not any(
        s.name.startswith("Start rank") and s.state != "skipped" for s in op.steps.all()
    )


def test_it_refuses_a_second_operation_and_recovers_from_a_dead_control_worker(
    sim_cluster: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = sim_cluster
    operator = make_user("opal", "operator")
    api = APIClient()
    api.force_authenticate(operator)
    slow = {**CONTROL_ENV, "WARMUP_REQUESTS": "400", "WARMUP_CONCURRENCY": "1"}
    with control_worker(slow) as worker:
        first = api.post(
            f"/api/clusters/{cluster.name}/operations/",
            {"kind": "start", "reason": "first"},
            format="json",
        )
        assert first.status_code == 201, first.content
        op = Operation.objects.get(pk=first.json()["id"])
        second = api.post(
            f"/api/clusters/{cluster.name}/operations/",
            {"kind": "start"},
            format="json",
            HTTP_ACCEPT_LANGUAGE="en",
        )
        assert second.status_code == 409
        assert (
            f"Operation #{op.pk}" in second.json()["detail"]
            and second.json()["running_operation"] == op.pk
        )
        deadline = time.monotonic() + 60
        while not op.steps.filter(name="Warm-up requests", state="running").exists():
            assert time.monotonic() < deadline, [
                (s.name, s.state) for s in op.steps.all()
            ]
            time.sleep(0.2)
        worker.kill()  # the control worker dies mid-start
        worker.wait()
    op.refresh_from_db()
    assert op.state == OperationState.RUNNING  # nobody knows yet
    from django.test import override_settings

    with override_settings(OPERATION_STALE_S=2):
        time.sleep(3)
        assert operation_reap_interrupted() == [op.pk]
    op.refresh_from_db()
    assert op.state == OperationState.INTERRUPTED and "no heartbeat" in op.error
    with control_worker(CONTROL_ENV):
        again = wait_op(operation_start(cluster=cluster, kind="start", user=operator))
        assert again.state == OperationState.SUCCEEDED, again.error
        assert (
            "stopped" in steps_by_name(again)["Clear leftover engines"].summary
        )  # the dead run's engines
        wait_op(operation_start(cluster=cluster, kind="stop", user=operator))
    assert sim_engines(state_dir) == []


def test_it_drives_the_same_operation_from_cli_and_api(
    sim_cluster: tuple[Cluster, Path],
) -> None:
    cluster, _ = sim_cluster
    viewer = make_user("vic", "viewer")
    api = APIClient()
    api.force_authenticate(viewer)
    assert (
        api.post(
            f"/api/clusters/{cluster.name}/operations/",
            {"kind": "preflight"},
            format="json",
        ).status_code
        == 403
    )
    assert (
        APIClient()
        .post(
            f"/api/clusters/{cluster.name}/operations/",
            {"kind": "preflight"},
            format="json",
        )
        .status_code
        == 401
    )
    operator = make_user("oswald", "operator")
    api.force_authenticate(operator)
    bad = api.post(
        f"/api/clusters/{cluster.name}/operations/", {"kind": "explode"}, format="json"
    )
    assert bad.status_code == 400 and "kind" in bad.json()
    with control_worker(CONTROL_ENV):
        out = io.StringIO()
        call_command("cluster", "preflight", cluster.name, "--wait", stdout=out)
        text = out.getvalue()
        assert "Agents reachable" in text and "succeeded" in text
        cli_op = Operation.objects.filter(source="cli").get()
        response = api.get(f"/api/operations/{cli_op.pk}/")
        assert response.status_code == 200 and response.json()["state"] == "succeeded"
        assert len(response.json()["steps"]) == 7
        created = api.post(
            f"/api/clusters/{cluster.name}/operations/",
            {"kind": "preflight", "reason": "api"},
            format="json",
        )
        api_op = wait_op(Operation.objects.get(pk=created.json()["id"]))
        assert api_op.state == "succeeded" and api_op.source == "api"
        with pytest.raises(CommandError, match="does not exist"):
            call_command("cluster", "start", "nope", stdout=io.StringIO())
