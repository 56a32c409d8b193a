"""A one-node cluster (DP1) starts: no rank joins from another node, so the start does
not wait for rank 0's RPC port (before, it waited ENGINE_LISTEN_TIMEOUT_S on a port
that only multi-node engines bind, and failed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.models import ClusterState, OperationState
from console.services.inventory import DEMO_PROFILES
from console.services.operations import operation_start
from tests.agents import agents, control_worker
from tests.factories import make_cluster, make_profile, make_user
from tests.integration.test_operations import CONTROL_ENV, FAST, wait_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_one_node_cluster_starts_without_waiting_for_an_rpc_port(
    tmp_path: Path,
) -> None:
    # W8A8 on one Atlas 800T A2: 8 × 64 GB holds the 397B quantised to 8 bits
    profile = make_profile(
        **{**DEMO_PROFILES["w8a8"], "name": "solo w8a8", "data_parallel_size": 1}
    )
    cluster = make_cluster("solo", nodes=1, profile=profile, free_ports=True)
    (node,) = cluster.ranked_nodes()
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path)}
    with (
        agents([node.name], extra_env=env, npu_ips={node.name: node.npu_ips}),
        control_worker({**CONTROL_ENV, "ENGINE_LISTEN_TIMEOUT_S": "5"}),
    ):
        op = wait_op(
            operation_start(
                cluster=cluster, kind="start", user=make_user("sol", "operator")
            ),
            timeout=180,
        )
        names = [s.name for s in op.steps.all()]
        assert op.state == OperationState.SUCCEEDED, (op.error, names)
        assert not any(n.startswith("Rank 0 listening") for n in names)
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.RUNNING
        stop = wait_op(
            operation_start(
                cluster=cluster, kind="stop", user=make_user("sol2", "operator")
            )
        )
        assert stop.state == OperationState.SUCCEEDED, stop.error
