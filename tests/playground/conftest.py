"""A sim engine (``python -m engine.sim.vllm serve``) per module, slowed for Stop."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agents import die_with_parent
from tests.factories import free_port, make_cluster, make_profile
from tests.integration.test_agent import wait_for

ROOT = Path(__file__).resolve().parents[2]
MODEL = "pg-model"


@dataclass(frozen=True)
class Engine:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metric(self, name: str, label: str = "") -> float:
        """Sum of a counter over its series (those whose labels contain ``label``)."""
        total, seen = 0.0, False
        for line in httpx.get(f"{self.url}/metrics", timeout=5).text.splitlines():
            if line.startswith(name + "{") and label in line:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
        assert seen, f"the engine exposes no {name}{{{label}}}"
        return total

    def aborts(self) -> float:
        return self.metric("vllm:request_success_total", 'finished_reason="abort"')


@contextmanager
def sim_engine(time_scale: str) -> Iterator[Engine]:
    """A 1-node DP1 sim engine, started the way engine/drivers/sim.py runs it."""
    engine = Engine(free_port())
    env = {
        **os.environ,
        "SIM_VLLM_VERSION": "0.33.0",
        "SIM_TIME_SCALE": time_scale,
        "SIM_LOAD_S": "0.1",
        "PYTHONPATH": str(ROOT),
    }
    argv = [
        sys.executable,
        "-m",
        "engine.sim.vllm",
        "serve",
        f"/data/models/{MODEL}",
        "--host",
        "127.0.0.1",
        "--port",
        str(engine.port),
        "--served-model-name",
        MODEL,
        "--max-model-len",
        "16384",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
    )
    try:

        def healthy() -> bool:
            assert proc.poll() is None, f"sim engine exited with {proc.returncode}"
            try:
                return httpx.get(f"{engine.url}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, timeout=60)
        yield engine
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    # 0.3: a decode step takes ~12 ms, so a 4000-token answer runs for most of a minute.
    with sim_engine("0.3") as running:
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
