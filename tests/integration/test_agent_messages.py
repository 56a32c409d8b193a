"""Hostile broker messages against a real agent worker: each is refused, nothing runs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from console.celery import app
from console.services.agents import agent_call
from tests.agents import agent_worker
from tests.factories import free_port
from tests.integration.test_agent import FAST_SIM, single_node_plan

pytestmark = pytest.mark.integration

ROOT_DROP = "head\n[Service]\nExecStartPre=+/bin/sh -c 'touch /tmp/pwned-by-role'"


def test_it_refuses_a_role_that_would_write_a_root_command_into_the_unit(
    tmp_path: Path,
) -> None:
    api, rpc = free_port(), free_port()
    with agent_worker("msg-01", extra_env={**FAST_SIM, "SIM_STATE_DIR": str(tmp_path)}):
        plan = single_node_plan("msg-01", api, rpc)
        # the raw Celery message an attacker on the broker would publish
        result = app.send_task(
            "engine.start",
            kwargs={"node": "msg-01", "plan": {**plan, "role": ROOT_DROP}},
            queue="node.msg-01",
        )
        with pytest.raises(ValueError, match="plan.role"):
            result.get(timeout=30)
        for bad, field in [
            ({**plan, "role": "worker"}, "plan.role"),
            ({**plan, "rank": "0; id"}, "plan.rank"),
            ({**plan, "argv": [*plan["argv"], "x\ny"]}, r"plan.argv\[\d+\]"),
            (
                {**plan, "env": {**plan["env"], "HF_TOKEN": "a\rb"}},
                r"plan.env\[HF_TOKEN\]",
            ),
            ({**plan, "exec": "id"}, "unknown keys: exec"),
        ]:
            with pytest.raises(ValueError, match=field):
                agent_call("msg-01", "engine.start", plan=bad)
        assert agent_call("msg-01", "engine.status")["state"] == "stopped"
        assert not (tmp_path / "msg-01" / "agent" / "plan.json").exists()


@pytest.mark.parametrize(
    ("task", "kwargs", "field"),
    [
        ("engine.logs", {"lines": "200; id"}, "lines"),
        ("engine.logs", {"lines": 10**9}, "lines"),
        ("engine.stop", {"grace_s": float("nan")}, "grace_s"),
        ("node.collect", {"model_path": "/data\n/x"}, "model_path"),
        (
            "node.preflight",
            {
                "expected_npus": 8,
                "host_ip": "127.0.0.1; id",
                "ports": [],
                "model_path": "",
                "ping_targets": [],
            },
            "host_ip",
        ),
        (
            "node.preflight",
            {
                "expected_npus": 8,
                "host_ip": "127.0.0.1",
                "ports": [0],
                "model_path": "",
                "ping_targets": ["-f 10.0.0.1"],
            },
            r"ports\[0\]",
        ),
        ("node.heartbeat", {"extra": 1}, "unexpected keyword|not allowed"),
        ("sim.inject", {"fault": "crash", "value": ["once"]}, "value"),
    ],
)
def test_it_refuses_every_field_off_its_allowlist(
    tmp_path: Path, task: str, kwargs: dict, field: str
) -> None:
    with agent_worker("msg-02", extra_env={"SIM_STATE_DIR": str(tmp_path)}):
        result = app.send_task(
            task, kwargs={"node": "msg-02", **kwargs}, queue="node.msg-02"
        )
        with pytest.raises((ValueError, TypeError), match=field):
            result.get(timeout=30)
        assert agent_call("msg-02", "node.heartbeat")["node"] == "msg-02"


def test_it_writes_its_plan_file_readable_by_itself_only(tmp_path: Path) -> None:
    api, rpc = free_port(), free_port()
    env = {
        **FAST_SIM,
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": ",".join(f"127.10.98.{i + 1}" for i in range(8)),
    }
    with agent_worker("msg-03", extra_env=env):
        plan = single_node_plan("msg-03", api, rpc)
        try:
            assert agent_call("msg-03", "engine.start", plan=plan)["ok"] is True
            mode = (tmp_path / "msg-03" / "agent" / "plan.json").stat().st_mode
            assert stat.S_IMODE(mode) == 0o600
        finally:
            agent_call("msg-03", "engine.stop", grace_s=5)


def test_it_answers_no_remote_control(tmp_path: Path) -> None:
    with agent_worker("msg-04", extra_env={"SIM_STATE_DIR": str(tmp_path)}) as proc:
        dest = ["agent.msg-04@test"]
        inspect = app.control.inspect(destination=dest, timeout=2)
        assert inspect.ping() is None
        assert inspect.conf() is None
        assert (
            app.control.broadcast("shutdown", destination=dest, reply=True, timeout=2)
            == []
        )
        assert proc.poll() is None
        assert agent_call("msg-04", "node.heartbeat")["node"] == "msg-04"
