"""The demo switched to containers: each rank is a `docker run` of the release's image
(simulator's docker CLI), started in rank order by the real control worker and agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.models import OperationState
from console.services.operations import operation_start
from tests.agents import control_worker
from tests.factories import make_user
from tests.integration.test_operations import (  # noqa: F401  (fixture)
    CONTROL_ENV,
    sim_cluster,
    steps_by_name,
    wait_op,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_it_starts_the_container_ranks_in_order_and_stops_them(
    sim_cluster,  # noqa: F811  (the fixture imported above)
    settings,
) -> None:
    cluster, state_dir = sim_cluster
    settings.SIM_CONTAINERS = True  # this process builds plans too (preflight, start)
    operator = make_user("olivia", "operator")
    nodes = cluster.ranked_nodes()
    with control_worker({**CONTROL_ENV, "SIM_CONTAINERS": "1"}):
        op = wait_op(operation_start(cluster=cluster, kind="start", user=operator))
        assert op.state == OperationState.SUCCEEDED, op.error
        steps = steps_by_name(op)
        started = [
            steps[f"Start rank {n.rank} on {n.name}"].data["started_at"] for n in nodes
        ]
        assert started == sorted(started)
        for n in nodes:
            (record,) = [
                json.loads(p.read_text())
                for p in Path(state_dir, n.name, "containers").glob("*.json")
            ]
            assert record["Name"] == f"/vllm-ops-r{n.rank}"
            assert record["Image"] == "quay.io/ascend/vllm-ascend:v0.23.0"
            assert record["HostConfig"]["NetworkMode"] == "host"
            assert record["Config"]["Labels"]["ascend.rank"] == str(n.rank)
        stop = wait_op(operation_start(cluster=cluster, kind="stop", user=operator))
        assert stop.state == OperationState.SUCCEEDED, stop.error
