"""A sim engine (``python -m engine.sim.vllm serve``) per module, slowed for Stop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.factories import make_cluster, make_profile
from tests.simengine import SimEngine, sim_engine

MODEL = "pg-model"


Engine = SimEngine  # the playground tests' name for it


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    # 0.3: a decode step takes ~12 ms, so a 4000-token answer runs for most of a minute.
    with sim_engine(MODEL, time_scale="0.3") as running:
        yield running


def running_cluster(
    engine: Engine, *, name: str = "pg-c", state: str = "running"
) -> Any:
    """A 1-node cluster whose head is the sim engine."""
    from console.models import Node

    profile = make_profile(
        name=f"{name} profile",
        served_model_name=MODEL,
        data_parallel_size=1,
        tensor_parallel_size=8,
    )
    cluster = make_cluster(name=name, nodes=1, profile=profile)
    Node.objects.filter(cluster=cluster, rank=0).update(
        management_ip="127.0.0.1", api_port=engine.port
    )
    cluster.state = state
    cluster.save(update_fields=["state"])
    return cluster
