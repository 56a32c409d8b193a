"""The checks on a plan's inputs and node plans: messages keyed by field, each saying the fix."""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict

from engine.flags import SUPPORTED_VERSIONS, check_argv
from engine.links import LINK_MODES
from engine.memory import DTYPE_BYTES
from engine.plans.argv import LINK_ENV
from engine.plans.specs import MODES, NodePlan, NodeSpec, ProfileSpec

# Why every rank of one engine must carry the same HCCL_INTRA_* pair.
LINK_PAIR_REASON = (
    "vllm-ascend reads HCCL_INTRA_PCIE_ENABLE/HCCL_INTRA_ROCE_ENABLE in every rank "
    "(vllm_ascend/utils.py is_hierarchical_communication_enabled) to decide whether the "
    "MoE dispatch/combine passes expert_scales (ops/fused_moe/token_dispatcher.py "
    "need_expert_scale), so ranks with different pairs run one EP group with "
    "inconsistent MC2 arguments"
)

# Set per node by the plan; one profile-wide extra_env value would be wrong somewhere.
PLAN_ENV = (
    "HCCL_IF_IP",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "HCCL_SOCKET_IFNAME",
    "HCCL_BUFFSIZE",
    "ASCEND_RT_VISIBLE_DEVICES",
    "HCCL_INTRA_PCIE_ENABLE",
    "HCCL_INTRA_ROCE_ENABLE",
)

# Flags the plan derives from profile and node fields; extra_flags must not repeat them.
PLAN_FLAGS: dict[str, str | None] = {
    "--served-model-name": "served_model_name",
    "--host": "host_ip",
    "--port": "api_port",
    "--api-server-count": "api_server_count",
    "--headless": "role",
    "--data-parallel-size": "data_parallel_size",
    "--data-parallel-size-local": "data_parallel_size",
    "--data-parallel-start-rank": "rank",
    "--data-parallel-address": "host_ip",
    "--data-parallel-rpc-port": "rpc_port",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "--enable-expert-parallel": "expert_parallel",
    "--nnodes": "nodes",
    "--node-rank": "rank",
    "--master-addr": "host_ip",
    "--master-port": "rpc_port",
    "--distributed-executor-backend": "mode",
    "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--dtype": "dtype",
    "--quantization": "quantization",
    "--enable-prefix-caching": "enable_prefix_caching",
    "--trust-remote-code": None,  # always on
}

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_NIC_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}\Z")


def _check_profile(profile: ProfileSpec, errors: dict[str, list[str]]) -> None:
    if profile.vllm_version not in SUPPORTED_VERSIONS:
        supported = ", ".join(SUPPORTED_VERSIONS)
        errors["vllm_version"].append(
            f"vLLM {profile.vllm_version} is not supported; pick one of {supported}."
        )
    if profile.mode not in MODES:
        errors["mode"].append(
            f"mode {profile.mode!r} is unknown; use 'dp' (DP+TP+EP) or 'tp_pp'."
        )
    for key, value in (
        ("data_parallel_size", profile.dp),
        ("tensor_parallel_size", profile.tp),
        ("pipeline_parallel_size", profile.pp),
        ("max_model_len", profile.max_model_len),
        ("max_num_seqs", profile.max_num_seqs),
        ("max_num_batched_tokens", profile.max_num_batched_tokens),
        ("api_server_count", profile.api_server_count),
        ("hccl_buffsize_mb", profile.hccl_buffsize_mb),
    ):
        if value < 1:
            errors[key].append(f"{key} is {value}; it must be at least 1.")
    if not 0 < profile.gpu_memory_utilization <= 1:
        errors["gpu_memory_utilization"].append(
            f"gpu_memory_utilization {profile.gpu_memory_utilization} must be in "
            "(0, 1]; 0.9 is the usual value."
        )
    if profile.dtype.lower() not in DTYPE_BYTES:
        errors["dtype"].append(
            f"dtype {profile.dtype!r} is unknown; use one of {', '.join(DTYPE_BYTES)}."
        )
    if not profile.model_path.strip():
        errors["model_path"].append(
            "model_path is empty; give the model directory present on every node."
        )
    if not profile.served_model_name.strip():
        errors["served_model_name"].append(
            "served_model_name is empty; clients address the model by this name."
        )


def _check_nodes(nodes: list[NodeSpec], errors: dict[str, list[str]]) -> None:
    if not nodes:
        errors["nodes"].append(
            "no nodes; add at least one node with role head and rank 0."
        )
        return
    _check_names_and_head(nodes, errors)
    _check_roles_and_ranks(nodes, errors)
    for node in nodes:
        _check_node_fields(node, errors)
    _check_shared_ports(nodes, errors)


def _check_names_and_head(nodes: list[NodeSpec], errors: dict[str, list[str]]) -> None:
    """Unique node names, and exactly one head, at rank 0."""
    names = [node.name for node in nodes]
    for name in sorted({n for n in names if names.count(n) > 1}):
        errors["nodes"].append(
            f"node name {name} is used twice; node names must be unique."
        )
    heads = [node for node in nodes if node.role == "head"]
    if len(heads) != 1:
        listed = ", ".join(node.name for node in heads) or "none"
        errors["nodes"].append(
            f"exactly one node must have role head (found {listed}); "
            "make rank 0 the head."
        )
    elif heads[0].rank != 0:
        errors["nodes"].append(
            f"head {heads[0].name} has rank {heads[0].rank}; the head must be rank 0."
        )


def _check_roles_and_ranks(nodes: list[NodeSpec], errors: dict[str, list[str]]) -> None:
    """Known roles, and ranks numbering the nodes 0..n-1 once each."""
    for node in nodes:
        if node.role not in ("head", "worker"):
            errors["role"].append(
                f"{node.name}: role {node.role!r} is unknown; use head or worker."
            )
    ranks = sorted(node.rank for node in nodes)
    if ranks != list(range(len(nodes))):
        errors["rank"].append(
            f"ranks are {ranks}; number the {len(nodes)} nodes "
            f"0..{len(nodes) - 1}, once each."
        )


def _check_node_fields(node: NodeSpec, errors: dict[str, list[str]]) -> None:
    """One node's own fields: address, interface, NPU count, link mode, ports."""
    try:
        ipaddress.ip_address(node.host_ip)
    except ValueError:
        errors["host_ip"].append(
            f"{node.name}: host_ip {node.host_ip!r} is not an IP address."
        )
    if not _NIC_NAME.match(node.nic_name):
        errors["nic_name"].append(
            f"{node.name}: nic_name {node.nic_name!r} is not an interface name."
        )
    if node.npu_count < 1:
        errors["npu_count"].append(
            f"{node.name}: npu_count is {node.npu_count}; it must be at least 1."
        )
    if node.link_mode not in LINK_MODES:
        errors["link_mode"].append(
            f"{node.name}: link_mode {node.link_mode!r} is unknown; "
            f"use {' or '.join(LINK_MODES)}."
        )
    for key, port in (("api_port", node.api_port), ("rpc_port", node.rpc_port)):
        if not 1 <= port <= 65535:
            errors[key].append(f"{node.name}: {key} {port} is outside 1..65535.")
    if node.api_port == node.rpc_port:
        errors["rpc_port"].append(
            f"{node.name}: rpc_port {node.rpc_port} equals api_port; pick another port."
        )


def _check_shared_ports(nodes: list[NodeSpec], errors: dict[str, list[str]]) -> None:
    """Distinct ports among nodes sharing an address (e.g. simulated nodes on one host)."""
    users: dict[tuple[str, int], list[str]] = defaultdict(list)
    for node in nodes:
        users[(node.host_ip, node.api_port)].append(f"{node.name} api_port")
        if node.rpc_port != node.api_port:
            users[(node.host_ip, node.rpc_port)].append(f"{node.name} rpc_port")
    for (host, port), owners in users.items():
        if len(owners) > 1:
            key = "api_port" if owners[0].endswith("api_port") else "rpc_port"
            errors[key].append(
                f"port {port} on {host} is used by {', '.join(owners)}; "
                "give each a different port."
            )


def _world_mismatch(
    profile: ProfileSpec,
    key: str,
    total: int,
    per_node: int,
    n: int,
    errors: dict[str, list[str]],
) -> None:
    world = profile.dp * profile.tp * profile.pp
    fix = (
        f"set {key} to {total // profile.tp}"
        if total % profile.tp == 0
        else "change TP"
    )
    errors[key].append(
        f"DP×TP×PP = {profile.dp}×{profile.tp}×{profile.pp} = {world} but the {n} "
        f"nodes have {total} NPUs ({per_node} each); {fix} or change the node count."
    )


def _check_topology(
    profile: ProfileSpec, nodes: list[NodeSpec], errors: dict[str, list[str]]
) -> None:
    counts = {node.npu_count for node in nodes}
    if len(counts) > 1:
        errors["npu_count"].append(
            f"nodes have different NPU counts {sorted(counts)}; use nodes of one kind."
        )
        return
    per_node = counts.pop()
    n = len(nodes)
    total = per_node * n
    world = profile.dp * profile.tp * profile.pp
    if profile.tp > per_node:
        errors["tensor_parallel_size"].append(
            f"TP {profile.tp} exceeds the {per_node} NPUs on node {nodes[0].name}; "
            f"lower it to {per_node} or fewer and raise data_parallel_size (dp mode) "
            "or pipeline_parallel_size (tp_pp mode) instead."
        )
    if profile.mode == "dp":
        if profile.pp != 1:
            errors["pipeline_parallel_size"].append(
                "dp mode runs pipeline_parallel_size 1; use mode tp_pp for PP."
            )
        elif profile.dp % n:
            errors["data_parallel_size"].append(
                f"DP {profile.dp} does not split evenly over {n} nodes; "
                f"make it a multiple of {n}."
            )
        elif world != total:
            _world_mismatch(profile, "data_parallel_size", total, per_node, n, errors)
    elif profile.mode == "tp_pp":
        if profile.dp != 1:
            errors["data_parallel_size"].append(
                "tp_pp mode runs one replica; set data_parallel_size to 1 or use dp."
            )
        elif world != total:
            _world_mismatch(
                profile, "pipeline_parallel_size", total, per_node, n, errors
            )


def _flag_names(argv: list[str]) -> list[str]:
    names = []
    for token in argv:
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            names.append(
                "--" + name[len("--no-") :] if name.startswith("--no-") else name
            )
    return names


def _check_extras(profile: ProfileSpec, errors: dict[str, list[str]]) -> None:
    for name in _flag_names(profile.extra_flags):
        if name in PLAN_FLAGS:
            source = PLAN_FLAGS[name]
            fix = (
                f"from {source}; change that field"
                if source
                else "always; remove it from extra_flags"
            )
            errors["extra_flags"].append(f"{name} is set by the plan {fix}.")
    if profile.vllm_version in SUPPORTED_VERSIONS:
        for problem in check_argv(
            [profile.model_path, *profile.extra_flags], profile.vllm_version
        ):
            errors["extra_flags"].append(problem.message)
    for key, value in profile.extra_env.items():
        if key in PLAN_ENV:
            errors["extra_env"].append(
                f"{key} is set per node by the plan (link_mode, nic_name, host_ip, "
                "hccl_buffsize_mb); remove it."
            )
        elif not _ENV_NAME.match(key):
            errors["extra_env"].append(
                f"{key!r} is not a valid environment variable name."
            )
        if "\n" in value or "\0" in value:
            errors["extra_env"].append(
                f"{key}: values cannot contain newlines or NUL bytes."
            )


def link_pair_errors(plans: list[NodePlan]) -> list[str]:
    """Refusals for an engine whose ranks carry different HCCL_INTRA_* pairs.

    Every node plan of one engine must have the same (HCCL_INTRA_PCIE_ENABLE,
    HCCL_INTRA_ROCE_ENABLE) pair; see LINK_PAIR_REASON. Returns [] when consistent.
    build_plan adds these to errors["link_mode"]: the failover, fail-back and replace
    runbooks apply one pair to every rank (issue 13).
    """
    pairs: dict[tuple[str | None, ...], list[str]] = defaultdict(list)
    for plan in plans:
        pair = tuple(plan.env.get(name) for name in LINK_ENV["hccs"])  # PCIE, ROCE
        pairs[pair].append(plan.name)
    if len(pairs) <= 1:
        return []
    listed = "; ".join(
        f"PCIE={p or 'unset'} ROCE={r or 'unset'} on {', '.join(names)}"
        for (p, r), names in pairs.items()
    )
    return [
        f"the engine's ranks carry different HCCL link settings ({listed}); set the "
        f"same link_mode on every node: {LINK_PAIR_REASON}."
    ]
