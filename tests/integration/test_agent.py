"""The node agent through a real Celery worker on Redis, driving a real sim engine process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from celery.exceptions import NotRegistered

from console.celery import app
from console.services.agents import AgentUnreachable, agent_call
from engine.agent import ALLOWED_TASKS
from engine.plans import NodeSpec, ProfileSpec, build_plan
from tests.agents import agent_worker
from tests.factories import free_port

pytestmark = pytest.mark.integration
FAST_SIM = {"SIM_TIME_SCALE": "0.05", "SIM_LOAD_S": "0.5"}


def single_node_plan(node: str, api_port: int, rpc_port: int) -> dict[str, Any]:
    """A 1-node DP1 x TP8 plan of a small MoE model (fits one 8 x 64 GB node)."""
    profile = ProfileSpec(
        name="small",
        model_path="/data/models/small-moe",
        served_model_name="small",
        vllm_version="0.23.0",
        mode="dp",
        dp=1,
        tp=8,
        pp=1,
        expert_parallel=True,
        dtype="bfloat16",
        quantization=None,
        max_model_len=8192,
        max_num_seqs=8,
        max_num_batched_tokens=4096,
        gpu_memory_utilization=0.9,
        enable_prefix_caching=True,
        api_server_count=1,
        extra_flags=[],
        extra_env={},
        total_params_b=30.0,
        active_params_b=3.0,
        num_layers=48,
        num_experts=128,
        hidden_size=2048,
        num_kv_heads=4,
        head_dim=128,
    )
    spec = NodeSpec(
        name=node,
        rank=0,
        role="head",
        host_ip="127.0.0.1",
        nic_name="lo",
        npu_count=8,
        hbm_gb=64,
        npu_ips=[f"127.10.99.{i + 1}" for i in range(8)],
        api_port=api_port,
        rpc_port=rpc_port,
        link_mode="hccs",
        driver="sim",
    )
    return build_plan("solo", [spec], profile).nodes[0].to_dict()


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def test_it_allowlists_exactly_its_tasks() -> None:
    code = "from engine.agent import app; print(sorted(n for n in app.tasks if not n.startswith('celery.')))"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    ).stdout
    assert out.strip() == str(sorted(ALLOWED_TASKS))


def test_it_starts_reports_and_stops_a_sim_engine(tmp_path: Path) -> None:
    api, rpc = free_port(), free_port()
    env = {
        **FAST_SIM,
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": ",".join(f"127.10.99.{i + 1}" for i in range(8)),
    }
    with agent_worker("solo-01", extra_env=env):
        plan = single_node_plan("solo-01", api, rpc)
        started = agent_call("solo-01", "engine.start", plan=plan)
        assert (
            started["ok"] is True and started["state"] == "running" and started["pid"]
        )
        status = wait_for(
            lambda: (
                (s := agent_call("solo-01", "engine.status"))
                and s["health"] == 200
                and s
            )
        )
        assert status["ranks_joined"] == 1 and status["uptime_s"] >= 0
        models = httpx.get(f"http://127.0.0.1:{api}/v1/models", timeout=5).json()
        assert models["data"][0]["id"] == "small"
        logs = agent_call("solo-01", "engine.logs", lines=50)
        assert any(
            "Application startup complete" in line or "Started server process" in line
            for line in logs["lines"]
        )
        sample = agent_call("solo-01", "node.collect")
        assert len(sample["chips"]) == 8 and sample["errors"] == []
        assert len(sample["hccs"]) == 8 and len(sample["hccs"][0]["links"]) == 7
        assert [p["link"] for p in sample["roce"]] == ["UP"] * 8
        assert (
            sample["engine"]["state"] == "running"
            and sample["host"]["engine_rss_mb"] > 0
        )
        assert (
            max(c["hbm_used_mb"] for c in sample["chips"]) > 30000
        )  # the engine filled HBM
        pid = started["pid"]
        stopped = agent_call("solo-01", "engine.stop", grace_s=10)
        assert stopped["state"] in ("stopped", "exited")
        assert (
            not psutil.pid_exists(pid)
            or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        )
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{api}/health", timeout=2)
        assert agent_call("solo-01", "engine.status")["state"] in ("stopped", "exited")


def test_it_refuses_foreign_argv_and_env(tmp_path: Path) -> None:
    api, rpc = free_port(), free_port()
    with agent_worker(
        "solo-02", extra_env={**FAST_SIM, "SIM_STATE_DIR": str(tmp_path)}
    ):
        plan = single_node_plan("solo-02", api, rpc)
        with pytest.raises(ValueError, match="must be 'vllm serve MODEL"):
            agent_call(
                "solo-02", "engine.start", plan={**plan, "argv": ["bash", "-c", "id"]}
            )
        with pytest.raises(ValueError, match="--num-scheduler-steps"):
            agent_call(
                "solo-02",
                "engine.start",
                plan={**plan, "argv": plan["argv"] + ["--num-scheduler-steps", "8"]},
            )
        with pytest.raises(ValueError, match="LD_PRELOAD"):
            agent_call(
                "solo-02",
                "engine.start",
                plan={**plan, "env": {**plan["env"], "LD_PRELOAD": "/tmp/x.so"}},
            )
        with pytest.raises(ValueError, match="reached the agent of 'solo-02'"):
            app.send_task(
                "engine.status", kwargs={"node": "other"}, queue="node.solo-02"
            ).get(timeout=20)
        status = agent_call("solo-02", "engine.status")
        assert status["state"] == "stopped"


def test_it_ignores_tasks_outside_the_allowlist(tmp_path: Path) -> None:
    with agent_worker("solo-03", extra_env={"SIM_STATE_DIR": str(tmp_path)}) as proc:
        result = app.send_task(
            "os.system", args=["touch /tmp/pwned-by-test"], queue="node.solo-03"
        )
        with pytest.raises(NotRegistered):  # the agent refuses it by name; nothing runs
            result.get(timeout=3)
        assert not Path("/tmp/pwned-by-test").exists()
        assert (
            agent_call("solo-03", "node.heartbeat")["node"] == "solo-03"
        )  # still healthy
    assert proc.returncode is not None


def test_it_refuses_fault_injection_on_a_real_driver(tmp_path: Path) -> None:
    with agent_worker(
        "real-01", driver="process", extra_env={"AGENT_WORKDIR": str(tmp_path)}
    ):
        with pytest.raises(PermissionError, match="runs the process driver"):
            agent_call("real-01", "sim.inject", fault="roce-down")


def test_it_injects_faults_that_the_tools_then_show(tmp_path: Path) -> None:
    with agent_worker(
        "sim-07",
        extra_env={
            "SIM_STATE_DIR": str(tmp_path),
            "SIM_NPU_IPS": ",".join(f"127.10.7.{i + 1}" for i in range(8)),
        },
    ):
        injected = agent_call("sim-07", "sim.inject", fault="roce-down")
        assert injected["active"] == ["roce_down"] or "roce" in " ".join(
            injected["active"]
        )
        sample = agent_call("sim-07", "node.collect")
        assert {p["link"] for p in sample["roce"]} == {"DOWN"}
        with pytest.raises(ValueError, match="hccs-loss"):
            agent_call("sim-07", "sim.inject", fault="hccs-loss", value="lots")
        agent_call("sim-07", "sim.inject", fault="agent-stop")
        with pytest.raises(AgentUnreachable):
            agent_call("sim-07", "node.heartbeat", timeout=3)
        agent_call("sim-07", "sim.clear")
        assert agent_call("sim-07", "node.heartbeat")["node"] == "sim-07"
        assert {p["link"] for p in agent_call("sim-07", "node.collect")["roce"]} == {
            "UP"
        }


def test_many_threads_of_one_process_all_get_their_answers(tmp_path: Path) -> None:
    """The control worker waits for agents from several threads at once (an operation
    and a collect round side by side); each must get its own answer (celery#3761)."""
    from concurrent.futures import ThreadPoolExecutor

    with agent_worker("solo-04", extra_env={"SIM_STATE_DIR": str(tmp_path)}):
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(
                pool.map(
                    lambda _: agent_call("solo-04", "node.heartbeat", timeout=20),
                    range(32),
                )
            )
    assert len(answers) == 32 and {a["node"] for a in answers} == {"solo-04"}
