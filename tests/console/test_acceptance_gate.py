"""The correctness gate against a real sim engine: passing, and failing on the garbled fault."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from console.models import AuditEvent, Cluster, ClusterState, GateRun, Node
from console.services.acceptance import acceptance_gate
from engine.sim import state
from tests.conftest import login
from tests.simengine import SimEngine, sim_engine

MODEL = "qwen3.5"  # the demo profile's served model name


@pytest.fixture(scope="module")
def engine_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim-state")


@pytest.fixture(scope="module")
def engine(engine_dir: Path) -> Iterator[SimEngine]:
    env = {"SIM_STATE_DIR": str(engine_dir), "SIM_NODE": "ascend-01"}
    with sim_engine(MODEL, extra_env=env) as eng:
        yield eng


@pytest.fixture
def serving(cluster: Cluster, engine: SimEngine, engine_dir: Path) -> Iterator[Cluster]:
    """The demo cluster, its head pointed at the running sim engine, faults cleared."""
    state.clear_faults(engine_dir / "ascend-01")
    Node.objects.filter(name="ascend-01").update(
        management_ip="127.0.0.1", api_port=engine.port
    )
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    cluster.refresh_from_db()
    yield cluster
    state.clear_faults(engine_dir / "ascend-01")


def _garble(engine_dir: Path) -> None:
    import time

    state.inject_fault(engine_dir / "ascend-01", "garbled", None)
    time.sleep(1.2)  # the head re-reads its faults every 0.5 s


def test_it_passes_a_healthy_engine(serving: Cluster) -> None:
    result = acceptance_gate(serving, trigger="start")
    assert result.passed, result.reason
    assert not result.blocks_serving
    run = GateRun.objects.get()
    assert run.accuracy == 1.0 and run.trigger == "start"
    assert {s["id"] for s in run.samples} >= {
        "arith-add",
        "qa-capital",
        "code-add",
        "chat-sanity",
    }
    assert AuditEvent.objects.filter(action="cluster.gate", result="success").exists()


def test_a_garbled_engine_fails_raises_an_alert_naming_the_samples(
    serving: Cluster, engine_dir: Path, django_capture_on_commit_callbacks: Any
) -> None:
    from console.gateway.routing import serving_upstreams
    from monitoring.models.alerts import Alert, AlertState

    def pool() -> list[str]:
        return [u.cluster_name for u in serving_upstreams()]

    assert serving.name in pool()
    _garble(engine_dir)
    with django_capture_on_commit_callbacks(execute=True):
        result = acceptance_gate(serving, trigger="restart")
    assert not result.passed
    # the cluster still runs, but the gateway sends it nothing until a gate passes
    serving.refresh_from_db()
    assert serving.state == ClusterState.RUNNING and serving.gate_blocked
    assert serving.name not in pool()
    assert result.blocks_serving  # the demo cluster's policy is enforce
    assert "arith-add" in result.failing_samples
    assert "chat-sanity" in result.failing_samples
    chat = next(s for s in result.run.samples if s["id"] == "chat-sanity")  # type: ignore[union-attr]
    assert any("runaway repetition" in p for p in chat["problems"])
    audit = AuditEvent.objects.get(action="cluster.gate")
    assert audit.result == "failure" and "arith-add" in audit.after["failing"]
    alert = Alert.objects.get(rule__name="Correctness gate failed", target=serving.name)
    assert alert.state == AlertState.FIRING
    assert "arith-add" in alert.message and "chat-sanity" in alert.message
    assert "arith-add" in alert.labels["failing_samples"]

    # cleared fault → the next gate passes and resolves the alert
    state.clear_faults(engine_dir / "ascend-01")
    import time

    time.sleep(1.2)
    with django_capture_on_commit_callbacks(execute=True):
        assert acceptance_gate(serving, trigger="manual").passed
    alert.refresh_from_db()
    assert alert.state == AlertState.RESOLVED
    assert serving.name in pool()  # back in the gateway's pool


def test_warn_policy_fails_without_blocking_and_off_skips(
    serving: Cluster, engine_dir: Path
) -> None:
    _garble(engine_dir)
    Cluster.objects.filter(pk=serving.pk).update(gate_policy="warn")
    serving.refresh_from_db()
    result = acceptance_gate(serving, trigger="start")
    assert not result.passed and not result.blocks_serving
    Cluster.objects.filter(pk=serving.pk).update(gate_policy="off")
    serving.refresh_from_db()
    skipped = acceptance_gate(serving, trigger="start")
    assert skipped.passed and skipped.run is None
    assert GateRun.objects.count() == 1  # off: nothing asked, nothing recorded


def test_the_rest_endpoint_is_operator_only_and_refuses_a_stopped_cluster(
    serving: Cluster, viewer: Any, operator: Any
) -> None:
    url = f"/api/clusters/{serving.name}/gate/"
    assert login(viewer).post(url).status_code == 403
    response = login(operator).post(url)
    assert response.status_code == 201, response.content
    assert response.json()["passed"] is True
    assert login(viewer).get(url).json()[0]["id"] == response.json()["id"]
    from console.models import Operation

    op = Operation.objects.create(cluster=serving, kind="restart", state="running")
    busy = login(operator).post(url)
    assert busy.status_code == 409 and busy.json()["running_operation"] == op.pk
    Operation.objects.filter(pk=op.pk).update(state="succeeded")
    Cluster.objects.filter(pk=serving.pk).update(state=ClusterState.STOPPED)
    refused = login(operator).post(url)
    assert (
        refused.status_code == 409
        and "start the cluster first" in refused.json()["cluster"][0]
    )


def test_manage_gate_prints_the_samples_and_exits_nonzero_on_failure(
    serving: Cluster, engine_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("gate", serving.name)
    assert "PASSED" in capsys.readouterr().out
    _garble(engine_dir)
    with pytest.raises(SystemExit) as exit_:
        call_command("gate", serving.name, "--json")
    assert exit_.value.code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False
    assert {s["id"] for s in data["samples"] if not s["passed"]} >= {
        "arith-add",
        "qa-gold",
    }
