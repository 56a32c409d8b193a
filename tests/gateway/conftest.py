"""A live gateway for the SDK tests: two sim engines (vLLM 0.33 and one posing as
pre-0.11.1) and uvicorn.

The engines and the server live for the whole module (they hold no database
state); each test makes its own clusters and keys, which the server reads from the
shared test database.
"""

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
from tests.factories import free_port
from tests.integration.test_agent import wait_for

ROOT = Path(__file__).resolve().parents[2]
NEW_MODEL, OLD_MODEL = "gw-new", "gw-old"


@dataclass(frozen=True)
class SimEngine:
    """One running ``python -m engine.sim.vllm serve`` on a loopback port."""

    model: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def aborts(self) -> float:
        """The engine's count of requests finished with reason "abort" (what a client
        disconnect leads to)."""
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        for line in text.splitlines():
            if (
                line.startswith("vllm:request_success_total{")
                and 'finished_reason="abort"' in line
            ):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("the engine exposes no abort counter")


@contextmanager
def sim_engine(model: str) -> Iterator[SimEngine]:
    """Start a 1-node DP1 sim engine the way engine/drivers/sim.py does, until the block
    ends."""
    engine = SimEngine(model, free_port())
    env = {
        **os.environ,
        "SIM_VLLM_VERSION": "0.33.0",
        "SIM_TIME_SCALE": "0.05",
        "SIM_LOAD_S": "0.1",
        "PYTHONPATH": str(ROOT),
    }
    argv = [
        sys.executable,
        "-m",
        "engine.sim.vllm",
        "serve",
        f"/data/models/{model}",
        "--host",
        "127.0.0.1",
        "--port",
        str(engine.port),
        "--served-model-name",
        model,
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
            assert proc.poll() is None, (
                f"sim engine {model} exited with {proc.returncode}"
            )
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
def engines() -> Iterator[dict[str, SimEngine]]:
    with sim_engine(NEW_MODEL) as new, sim_engine(OLD_MODEL) as old:
        yield {NEW_MODEL: new, OLD_MODEL: old}


@pytest.fixture(scope="module")
def gateway_url(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    """uvicorn serving console.asgi on the test database; usage flushed after every
    request."""
    from tests.e2e.test_dashboard import uvicorn_server

    os.environ["GATEWAY_USAGE_FLUSH_S"] = "0"
    try:
        with uvicorn_server() as base:
            yield base
    finally:
        os.environ.pop("GATEWAY_USAGE_FLUSH_S", None)
