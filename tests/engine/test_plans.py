from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from engine.flags import check_argv, flag_table
from engine.plans import (
    ClusterPlan,
    NodeSpec,
    PlanError,
    ProfileSpec,
    build_plan,
    link_pair_errors,
)

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "plans"


def demo_nodes(count: int = 4, first: int = 1) -> list[NodeSpec]:
    """ascend-01..04 on loopback-range addresses, ranks 0..n-1, node 0 the head."""
    return [
        NodeSpec(
            name=f"ascend-{first + i:02d}",
            rank=i,
            role="head" if i == 0 else "worker",
            host_ip=f"127.0.1.{first + i}",
            nic_name="enp189s0f0",
            npu_count=8,
            hbm_gb=64.0,
            npu_ips=[f"127.0.2.{(first + i - 1) * 8 + j + 1}" for j in range(8)],
            api_port=18001,
            rpc_port=13389,
            link_mode="hccs",
        )
        for i in range(count)
    ]


def demo_profile(**changes: object) -> ProfileSpec:
    """Qwen3.5-397B-A17B BF16, DP4 × TP8, EP on 4 × Atlas 800T A2.

    Model facts: reference/vllm-facts.md §5 (15 of 60 layers are full attention).
    """
    profile = ProfileSpec(
        name="Qwen3.5-397B-A17B BF16, DP4 x TP8, EP",
        model_path="/data/models/Qwen3.5-397B-A17B",
        served_model_name="qwen3.5",
        vllm_version="0.23.0",
        mode="dp",
        dp=4,
        tp=8,
        pp=1,
        expert_parallel=True,
        dtype="bfloat16",
        quantization=None,
        max_model_len=32768,
        max_num_seqs=32,
        max_num_batched_tokens=4096,
        gpu_memory_utilization=0.9,
        enable_prefix_caching=True,
        api_server_count=2,
        extra_flags=[],
        extra_env={},
        total_params_b=397.0,
        active_params_b=17.0,
        num_layers=60,
        num_experts=512,
        hidden_size=4096,
        num_kv_heads=2,
        head_dim=256,
        hccl_buffsize_mb=1024,
        kv_layers=15,
    )
    return dataclasses.replace(profile, **changes)  # type: ignore[arg-type]


def tp_pp_profile(**changes: object) -> ProfileSpec:
    base: dict[str, object] = {
        "name": "Qwen3.5-397B-A17B BF16, TP8 x PP4",
        "mode": "tp_pp",
        "dp": 1,
        "pp": 4,
        "api_server_count": 1,
    }
    return demo_profile(**{**base, **changes})


def w8a8_profile(**changes: object) -> ProfileSpec:
    base: dict[str, object] = {
        "name": "Qwen3.5-397B-A17B W8A8, DP2 x TP8, EP",
        "model_path": "/data/models/Qwen3.5-397B-A17B-w8a8-mtp",
        "quantization": "ascend",
        "dp": 2,
    }
    return demo_profile(**{**base, **changes})


def errors_of(nodes: list[NodeSpec], profile: ProfileSpec) -> dict[str, list[str]]:
    with pytest.raises(PlanError) as info:
        build_plan("qwen35-prod", nodes, profile)
    return info.value.errors


@pytest.mark.parametrize(
    ("golden", "profile"),
    [
        ("qwen35-dp4-tp8-ep-bf16.json", demo_profile()),
        ("qwen35-tp8-pp4-bf16.json", tp_pp_profile()),
    ],
)
def test_it_matches_the_golden_plan(golden: str, profile: ProfileSpec) -> None:
    plan = build_plan("qwen35-prod", demo_nodes(), profile)
    expected = json.loads((GOLDEN / golden).read_text(encoding="utf-8"))
    assert plan.to_dict() == expected


def test_it_follows_the_vllm_ascend_dp_recipe() -> None:
    plan = build_plan("qwen35-prod", demo_nodes(), demo_profile())
    head, *workers = plan.nodes
    assert head.argv[:3] == ["vllm", "serve", "/data/models/Qwen3.5-397B-A17B"]
    assert head.role == "head" and "--headless" not in head.argv
    assert head.argv[head.argv.index("--api-server-count") + 1] == "2"
    for k, node in enumerate(workers, start=1):
        assert node.role == "headless" and "--headless" in node.argv
        assert node.argv[node.argv.index("--data-parallel-start-rank") + 1] == str(k)
        assert "--port" not in node.argv
    for node in plan.nodes:
        argv = node.argv
        assert argv[argv.index("--data-parallel-address") + 1] == "127.0.1.1"
        assert argv[argv.index("--data-parallel-rpc-port") + 1] == "13389"
        assert argv[argv.index("--data-parallel-size-local") + 1] == "1"
        assert "--enable-expert-parallel" in argv


@pytest.mark.parametrize(
    "profile", [demo_profile(), tp_pp_profile(), demo_profile(vllm_version="0.33.0")]
)
def test_it_emits_only_flags_the_target_version_has(profile: ProfileSpec) -> None:
    plan = build_plan("qwen35-prod", demo_nodes(), profile)
    table = flag_table(profile.vllm_version)
    for node in plan.nodes:
        for token in node.argv:
            if token.startswith("--no-"):
                assert table["--" + token[len("--no-") :]].boolean_optional
            elif token.startswith("--"):
                assert token in table
        assert check_argv(node.argv[2:], profile.vllm_version) == []


def test_it_sets_the_node_environment() -> None:
    nodes = demo_nodes()
    for node in nodes:
        node.link_mode = "roce"
    plan = build_plan(
        "qwen35-prod",
        nodes,
        demo_profile(extra_env={"VLLM_ENGINE_READY_TIMEOUT_S": "1800"}),
    )
    third = plan.nodes[2].env
    assert third["HCCL_IF_IP"] == "127.0.1.3"
    assert (
        third["GLOO_SOCKET_IFNAME"]
        == third["TP_SOCKET_IFNAME"]
        == third["HCCL_SOCKET_IFNAME"]
        == "enp189s0f0"
    )
    assert (third["HCCL_INTRA_PCIE_ENABLE"], third["HCCL_INTRA_ROCE_ENABLE"]) == (
        "0",
        "1",
    )
    assert (
        plan.nodes[0].env["HCCL_INTRA_PCIE_ENABLE"],
        plan.nodes[0].env["HCCL_INTRA_ROCE_ENABLE"],
    ) == ("0", "1")
    assert third["VLLM_ENGINE_READY_TIMEOUT_S"] == "1800"
    assert third["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


def test_it_sets_an_engine_ready_timeout_above_vllms_default() -> None:
    # vLLM's 600 s default would raise TimeoutError while a 397B model loads; the plan
    # raises it (the tutorial's 30000 is fitted below the console's own /health wait)
    plan = build_plan("qwen35-prod", demo_nodes(), demo_profile())
    values = {int(n.env["VLLM_ENGINE_READY_TIMEOUT_S"]) for n in plan.nodes}
    assert len(values) == 1 and values.pop() > 600


def test_it_refuses_an_engine_whose_ranks_carry_different_link_pairs() -> None:
    nodes = demo_nodes()
    nodes[2].link_mode = "roce"
    with pytest.raises(PlanError) as refused:
        build_plan("qwen35-prod", nodes, demo_profile())
    message = " ".join(refused.value.errors["link_mode"])
    assert "PCIE=0 ROCE=1 on ascend-03" in message
    assert "PCIE=1 ROCE=0 on ascend-01, ascend-02, ascend-04" in message
    assert "is_hierarchical_communication_enabled" in message
    assert "need_expert_scale" in message
    for node in nodes:
        node.link_mode = "roce"
    assert (
        link_pair_errors(build_plan("qwen35-prod", nodes, demo_profile()).nodes) == []
    )


def test_it_builds_the_w8a8_standby_pair() -> None:
    plan = build_plan("qwen35-standby", demo_nodes(2, first=5), w8a8_profile())
    assert [node.name for node in plan.nodes] == ["ascend-05", "ascend-06"]
    head = plan.nodes[0].argv
    assert head[head.index("--quantization") + 1] == "ascend"
    assert head[head.index("--data-parallel-size") + 1] == "2"
    assert plan.fit.fits


def test_it_orders_nodes_by_rank_and_round_trips() -> None:
    plan = build_plan("qwen35-prod", list(reversed(demo_nodes())), demo_profile())
    assert [node.rank for node in plan.nodes] == [0, 1, 2, 3]
    assert ClusterPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_it_appends_extra_flags() -> None:
    extra = [
        "--speculative-config",
        '{"method": "qwen3_5_mtp", "num_speculative_tokens": 3}',
        "--seed",
        "1024",
    ]
    plan = build_plan("qwen35-prod", demo_nodes(), demo_profile(extra_flags=extra))
    assert all(node.argv[-4:] == extra for node in plan.nodes)


def test_it_refuses_tp_larger_than_a_node() -> None:
    errors = errors_of(demo_nodes(), demo_profile(tp=16, dp=2))
    assert "TP 16 exceeds the 8 NPUs" in errors["tensor_parallel_size"][0]


def test_it_refuses_a_world_size_mismatch() -> None:
    errors = errors_of(demo_nodes(), demo_profile(dp=8))
    assert "= 64 but the 4 nodes have 32 NPUs" in errors["data_parallel_size"][0]
    assert "set data_parallel_size to 4" in errors["data_parallel_size"][0]
    errors = errors_of(demo_nodes(), tp_pp_profile(pp=2))
    assert "set pipeline_parallel_size to 4" in errors["pipeline_parallel_size"][0]


def test_it_refuses_two_heads() -> None:
    nodes = demo_nodes()
    nodes[1].role = "head"
    errors = errors_of(nodes, demo_profile())
    assert "exactly one node must have role head" in errors["nodes"][0]


def test_it_refuses_a_head_that_is_not_rank_0_and_gaps_in_ranks() -> None:
    nodes = demo_nodes()
    nodes[0].rank, nodes[1].rank = 1, 0
    assert "the head must be rank 0" in errors_of(nodes, demo_profile())["nodes"][0]
    nodes = demo_nodes()
    nodes[3].rank = 7
    assert "0..3" in errors_of(nodes, demo_profile())["rank"][0]


def test_it_refuses_duplicate_ports_on_one_host() -> None:
    nodes = demo_nodes()
    nodes[1].host_ip = nodes[0].host_ip
    errors = errors_of(nodes, demo_profile())
    assert any("port 18001 on 127.0.1.1" in msg for msg in errors["api_port"])
    nodes = demo_nodes()
    nodes[2].rpc_port = nodes[2].api_port
    assert "equals api_port" in errors_of(nodes, demo_profile())["rpc_port"][0]


def test_it_refuses_a_removed_extra_flag_naming_the_version() -> None:
    errors = errors_of(
        demo_nodes(), demo_profile(extra_flags=["--num-scheduler-steps", "8"])
    )
    assert errors["extra_flags"] == [
        "--num-scheduler-steps was removed before vLLM 0.23.0; "
        "drop it (multi-step scheduling is gone)"
    ]


def test_it_refuses_extra_flags_that_the_plan_sets() -> None:
    errors = errors_of(
        demo_nodes(),
        demo_profile(
            extra_flags=["--tensor-parallel-size=4", "--no-trust-remote-code"]
        ),
    )
    assert errors["extra_flags"][0].startswith(
        "--tensor-parallel-size is set by the plan from tensor_parallel_size"
    )
    assert errors["extra_flags"][1].startswith(
        "--trust-remote-code is set by the plan always"
    )


def test_it_refuses_extra_env_that_overrides_the_link() -> None:
    errors = errors_of(
        demo_nodes(), demo_profile(extra_env={"HCCL_INTRA_ROCE_ENABLE": "1"})
    )
    assert (
        "HCCL_INTRA_ROCE_ENABLE is set per node by the plan" in errors["extra_env"][0]
    )


def test_it_refuses_a_plan_that_does_not_fit_in_hbm() -> None:
    errors = errors_of(demo_nodes(2), demo_profile(dp=2))
    assert errors["memory"][0].startswith("does not fit: weights 48.2 GiB/NPU")


def test_it_refuses_an_unknown_version_naming_the_supported_ones() -> None:
    errors = errors_of(demo_nodes(), demo_profile(vllm_version="0.8.5"))
    assert errors["vllm_version"] == [
        "vLLM 0.8.5 is not supported; pick one of 0.23.0, 0.33.0."
    ]


def test_it_refuses_dp_mode_with_pipeline_stages() -> None:
    errors = errors_of(demo_nodes(), demo_profile(pp=2, dp=2))
    assert "use mode tp_pp" in errors["pipeline_parallel_size"][0]
