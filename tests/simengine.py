"""One single-node sim engine (``python -m engine.sim.vllm serve``) for the gateway and
playground tests, started the way engine/drivers/sim.py runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.agents import die_with_parent
from tests.factories import free_port
from tests.integration.test_agent import wait_for

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class SimEngine:
    """One running sim engine on a loopback port."""

    model: str
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
        """Requests finished with reason "abort" (what a client disconnect leads to)."""
        return self.metric("vllm:request_success_total", 'finished_reason="abort"')


@contextmanager
def sim_engine(
    model: str, *, time_scale: str = "0.05", extra_env: dict[str, str] | None = None
) -> Iterator[SimEngine]:
    """A DP1 sim engine serving ``model`` (vLLM 0.33.0 endpoints) until the block ends.

    ``time_scale`` multiplies the simulated latencies (0.3: a decode step ~12 ms)."""
    engine = SimEngine(model, free_port())
    env = {
        **os.environ,
        "SIM_VLLM_VERSION": "0.33.0",
        "SIM_TIME_SCALE": time_scale,
        "SIM_LOAD_S": "0.1",
        "PYTHONPATH": str(ROOT),
        **(extra_env or {}),
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
