"""Issue 17: the correctness gate runs inside a start, before the cluster is marked Running.

A start whose engine answers garbage (``sim inject NODE garbled``, the vllm-ascend
"garbled output after a healthy start" failure) fails at the gate: the engines it
started are stopped again, the cluster never reaches Running (so never enters the
gateway's pool), and the "Correctness gate failed" alert names the failing samples.
Real control worker, real node agents, real sim engines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.models import ClusterState, OperationState
from console.services.agents import agent_call
from console.services.operations import operation_start
from monitoring.alerts.gate import RULE_NAME
from monitoring.models.alerts import Alert
from tests.agents import agents, control_worker
from tests.factories import make_cluster, make_user
from tests.integration.test_operations import CONTROL_ENV, FAST, wait_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_garbled_engine_fails_the_gate_and_is_not_marked_running(
    tmp_path: Path,
) -> None:
    cluster = make_cluster("gate", nodes=4, free_ports=True)
    nodes = cluster.ranked_nodes()
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path)}
    with agents(
        [n.name for n in nodes],
        extra_env=env,
        npu_ips={n.name: n.npu_ips for n in nodes},
    ):
        agent_call(nodes[1], "sim.inject", fault="garbled")
        with control_worker(CONTROL_ENV):
            op = wait_op(
                operation_start(
                    cluster=cluster, kind="start", user=make_user("gina", "operator")
                )
            )
            steps = {s.name: s for s in op.steps.all()}
            gate = steps["Correctness gate"]
            cluster.refresh_from_db()
            statuses = [agent_call(n, "engine.status")["state"] for n in nodes]
    assert op.state == OperationState.FAILED, op.error
    assert gate.state == "failed" and "correctness gate failed" in gate.summary, [
        (s.name, s.state, s.summary) for s in steps.values()
    ]
    assert cluster.state != ClusterState.RUNNING
    assert "running" not in statuses  # the start's engines were stopped again
    alert = Alert.objects.get(rule__name=RULE_NAME, cluster=cluster)
    assert alert.state == "firing"
    # the alert names the failing samples (engine/gate.py SAMPLES ids)
    assert "samples (" in alert.message and "arith-add" in alert.message, alert.message
