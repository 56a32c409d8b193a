"""The simulator is a driver: importing the agent changes nothing; the driver answers for its node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.drivers import get_driver
from engine.drivers.base import TOOL_DIRS
from engine.sim import BIN_DIR

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_imports_the_sim_agent_without_touching_the_process(tmp_path: Path) -> None:
    code = (
        "import json, os; before = dict(os.environ); import engine.agent\n"
        "print(json.dumps({k: v for k, v in os.environ.items() if before.get(k) != v}))"
    )
    env = {
        "ENGINE_DRIVER": "sim",
        "NODE_NAME": "plug-n0",
        "SIM_STATE_DIR": str(tmp_path),
    }
    result = _python(code, env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {}  # PATH untouched
    assert not (tmp_path / "plug-n0").exists()  # no node state written at import


def test_the_sim_node_is_prepared_once_the_agent_runs_a_task(tmp_path: Path) -> None:
    code = (
        "import os, engine.agent as a\n"
        "print(a.heartbeat.run(node='plug-n1')['node'])\n"
        "print(os.environ['PATH'].split(os.pathsep)[0])"
    )
    env = {
        "ENGINE_DRIVER": "sim",
        "NODE_NAME": "plug-n1",
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": "10.0.0.1,10.0.0.2",
    }
    result = _python(code, env)
    assert result.returncode == 0, result.stderr
    node, first_on_path = result.stdout.split()[-2:]
    assert node == "plug-n1" and first_on_path == str(BIN_DIR)
    conf = (tmp_path / "plug-n1" / "hccn.conf").read_text()
    assert "address_1=10.0.0.2" in conf


def test_a_real_driver_refuses_fault_injection_and_looks_for_tools_where_ascend_installs_them() -> (
    None
):
    real = get_driver("process")
    with pytest.raises(PermissionError, match="runs the process driver"):
        real.fault_inject("n0", "crash", "once")
    assert real.tool_dirs == TOOL_DIRS and real.run_tool(["npu-smi", "info"]) is None
    assert real.versions() is None and str(real.model_dir("/m")) == "/m"
    sim = get_driver("sim")
    assert sim.tool_dirs == (str(BIN_DIR),) and sim.engine_dies_with_agent
