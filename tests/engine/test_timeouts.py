"""Timeouts that must agree across HCCL, vLLM and the console (engine.timeouts)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.plans import PlanError, build_plan
from engine.timeouts import check_timeouts, timeout_env
from tests.engine.test_plans import demo_nodes, demo_profile


def _keys(env: dict[str, str], **kw: int) -> list[tuple[str, str]]:
    kw.setdefault("nodes", 4)
    kw.setdefault("world_size", 32)
    return [(f.key, f.severity) for f in check_timeouts(env, **kw)]


def test_it_sets_timeouts_that_pass_its_own_rules() -> None:
    for nodes in (1, 4):
        for aiv in (False, True):
            env = timeout_env(nodes=nodes, aiv=aiv)
            if aiv:
                env["HCCL_OP_EXPANSION_MODE"] = "AIV"
            assert (
                check_timeouts(
                    env,
                    nodes=nodes,
                    world_size=8 * nodes,
                    console_health_timeout_s=1800,
                )
                == []
            ), (nodes, aiv)


def test_it_refuses_an_execute_timeout_not_above_hccls() -> None:
    # vllm-ascend PR #13232: execute_model RPC timeout must exceed the HCCL operator timeout
    env = timeout_env(nodes=4) | {"HCCL_EXEC_TIMEOUT": "3600"}
    [finding] = check_timeouts(env, nodes=4, world_size=32)
    assert finding.key == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"
    assert finding.severity == "error" and "13232" in finding.source
    assert "3000" in finding.message and "3600" in finding.message


def test_it_applies_vllms_300s_default_when_unset() -> None:
    env = {"HCCL_CONNECT_TIMEOUT": "600"}
    assert ("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "error") in _keys(env)


def test_it_refuses_a_connect_timeout_shorter_than_the_dp_start_window() -> None:
    env = timeout_env(nodes=4) | {"HCCL_CONNECT_TIMEOUT": "120"}
    assert ("HCCL_CONNECT_TIMEOUT", "error") in _keys(env)
    # one node: HCCL's default is enough
    assert _keys(timeout_env(nodes=1) | {"HCCL_CONNECT_TIMEOUT": "120"}, nodes=1) == []


def test_it_refuses_values_outside_hccls_ranges() -> None:
    assert ("HCCL_CONNECT_TIMEOUT", "error") in _keys(
        timeout_env(nodes=4) | {"HCCL_CONNECT_TIMEOUT": "9000"}
    )
    aiv = timeout_env(nodes=4) | {
        "HCCL_OP_EXPANSION_MODE": "AIV",
        "HCCL_EXEC_TIMEOUT": "1836",
    }
    assert ("HCCL_EXEC_TIMEOUT", "error") in _keys(aiv)
    assert _keys({"HCCL_EXEC_TIMEOUT": "soon"}) == [("HCCL_EXEC_TIMEOUT", "error")]


def test_it_warns_when_hccl_never_times_out() -> None:
    env = timeout_env(nodes=4) | {"HCCL_EXEC_TIMEOUT": "0"}
    assert _keys(env) == [("HCCL_EXEC_TIMEOUT", "warning")]


def test_it_refuses_a_console_wait_shorter_than_vllms() -> None:
    env = timeout_env(nodes=4) | {"VLLM_ENGINE_READY_TIMEOUT_S": "3600"}
    [finding] = check_timeouts(
        env, nodes=4, world_size=32, console_health_timeout_s=1800
    )
    assert (
        finding.severity == "error"
        and "ENGINE_HEALTH_TIMEOUT_S=1800" in finding.message
    )
    assert (
        check_timeouts(env, nodes=4, world_size=32, console_health_timeout_s=7200) == []
    )


def test_it_warns_when_vllm_gives_up_before_hccl_names_missing_ranks() -> None:
    env = timeout_env(nodes=4) | {"VLLM_ENGINE_READY_TIMEOUT_S": "300"}
    assert _keys(env) == [("VLLM_ENGINE_READY_TIMEOUT_S", "warning")]


def test_the_plan_sets_the_timeouts_and_lets_extra_env_override() -> None:
    plan = build_plan("qwen35-prod", demo_nodes(), demo_profile())
    for node in plan.nodes:
        assert node.env["HCCL_CONNECT_TIMEOUT"] == "600"
        assert int(node.env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"]) > int(
            node.env["HCCL_EXEC_TIMEOUT"]
        )
    profile = dataclasses.replace(
        demo_profile(), extra_env={"VLLM_ENGINE_READY_TIMEOUT_S": "900"}
    )
    plan = build_plan("qwen35-prod", demo_nodes(), profile)
    assert plan.nodes[0].env["VLLM_ENGINE_READY_TIMEOUT_S"] == "900"


def test_a_plan_whose_hccl_and_vllm_timeouts_disagree_is_refused_with_the_rule() -> (
    None
):
    profile = dataclasses.replace(
        demo_profile(),
        extra_env={
            "HCCL_EXEC_TIMEOUT": "3600",
            "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "1800",
        },
    )
    with pytest.raises(PlanError) as info:
        build_plan("qwen35-prod", demo_nodes(), profile)
    [message] = info.value.errors["extra_env"]
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=1800" in message
    assert "rule: vllm-ascend PR #13232" in message


def test_a_plan_that_outwaits_the_console_is_refused() -> None:
    profile = dataclasses.replace(
        demo_profile(), extra_env={"VLLM_ENGINE_READY_TIMEOUT_S": "3000"}
    )
    build_plan("qwen35-prod", demo_nodes(), profile)  # no console limit given: fine
    with pytest.raises(PlanError) as info:
        build_plan("qwen35-prod", demo_nodes(), profile, console_health_timeout_s=1800)
    assert "ENGINE_HEALTH_TIMEOUT_S" in info.value.errors["extra_env"][0]


def test_a_warning_travels_with_the_plan() -> None:
    profile = dataclasses.replace(demo_profile(), extra_env={"HCCL_EXEC_TIMEOUT": "0"})
    plan = build_plan("qwen35-prod", demo_nodes(), profile)
    assert len(plan.warnings) == 1 and "HCCL_EXEC_TIMEOUT=0" in plan.warnings[0]
    assert type(plan).from_dict(plan.to_dict()).warnings == plan.warnings


def test_the_plan_fits_vllms_ready_wait_inside_a_short_console_wait() -> None:
    plan = build_plan(
        "qwen35-prod", demo_nodes(), demo_profile(), console_health_timeout_s=60
    )
    assert plan.nodes[0].env["VLLM_ENGINE_READY_TIMEOUT_S"] == "54"
    assert any("VLLM_ENGINE_READY_TIMEOUT_S=54" in w for w in plan.warnings)
    plan = build_plan(
        "qwen35-prod", demo_nodes(), demo_profile(), console_health_timeout_s=1800
    )
    assert (
        plan.nodes[0].env["VLLM_ENGINE_READY_TIMEOUT_S"] == "1500" and not plan.warnings
    )
