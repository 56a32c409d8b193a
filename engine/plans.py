"""Launch plans: `vllm serve` argv and environment for every rank of a deployment.

Two layouts, both from the vLLM / vllm-ascend docs:
- "dp": the vllm-ascend multi-node "MP" recipe. Data parallel across nodes,
  tensor parallel inside a node, expert parallel for the MoE layers. Node 0 runs
  the API server and binds the DP handshake socket; the others run --headless.
- "tp_pp": tensor parallel inside a node, pipeline parallel across nodes with
  --nnodes/--node-rank/--master-addr (vLLM >= 0.11.1); --headless on ranks > 0.
"""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.flags import SUPPORTED_VERSIONS, check_argv
from engine.links import LINK_MODES, LinkMode
from engine.memory import DTYPE_BYTES, FitReport, estimate_fit
from engine.timeouts import check_timeouts, timeout_env

MODES = ("dp", "tp_pp")

# Intra-server link (reference/ascend-facts.md §4); vllm-ascend sets HCCS on A2.
LINK_ENV: dict[str, dict[str, str]] = {
    LinkMode.HCCS: {"HCCL_INTRA_PCIE_ENABLE": "1", "HCCL_INTRA_ROCE_ENABLE": "0"},
    LinkMode.ROCE: {"HCCL_INTRA_PCIE_ENABLE": "0", "HCCL_INTRA_ROCE_ENABLE": "1"},
}

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


@dataclass
class NodeSpec:
    """One Ascend server as the plan sees it."""

    name: str
    rank: int
    role: str  # "head" | "worker"
    host_ip: str
    nic_name: str
    npu_count: int
    hbm_gb: float
    npu_ips: list[str]
    api_port: int
    rpc_port: int
    link_mode: str  # a LinkMode value
    driver: str = "systemd"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeSpec:
        return cls(**data)


@dataclass
class ProfileSpec:
    """What to serve and how to split it; the model facts feed the memory estimate."""

    name: str
    model_path: str
    served_model_name: str
    vllm_version: str
    mode: str  # "dp" | "tp_pp"
    dp: int
    tp: int
    pp: int
    expert_parallel: bool
    dtype: str
    quantization: str | None
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    enable_prefix_caching: bool
    api_server_count: int
    extra_flags: list[str]
    extra_env: dict[str, str]
    total_params_b: float
    active_params_b: float
    num_layers: int
    num_experts: int
    hidden_size: int
    num_kv_heads: int
    head_dim: int
    hccl_buffsize_mb: int = 1024
    # layers keeping a KV cache (hybrid linear/full attention); None = num_layers
    kv_layers: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileSpec:
        return cls(**data)


@dataclass
class NodePlan:
    """What one node runs: argv starts with "vllm", "serve", model."""

    name: str
    rank: int
    role: str  # "head" | "headless"
    argv: list[str]
    env: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodePlan:
        return cls(
            name=data["name"],
            rank=data["rank"],
            role=data["role"],
            argv=list(data["argv"]),
            env=dict(data["env"]),
        )


@dataclass
class ClusterPlan:
    """Every node's plan, in rank order (start in this order, stop in reverse)."""

    cluster: str
    vllm_version: str
    nodes: list[NodePlan]
    fit: FitReport
    # timeout rules the plan passes only with a risk (engine.timeouts), rule + source
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "vllm_version": self.vllm_version,
            "nodes": [node.to_dict() for node in self.nodes],
            "fit": self.fit.to_dict(),
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterPlan:
        return cls(
            cluster=data["cluster"],
            vllm_version=data["vllm_version"],
            nodes=[NodePlan.from_dict(node) for node in data["nodes"]],
            fit=FitReport.from_dict(data["fit"]),
            warnings=list(data.get("warnings", [])),
        )


class PlanError(Exception):
    """The inputs cannot make a working plan.

    `errors` maps a field name to messages that say the fix.
    """

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = {key: list(messages) for key, messages in errors.items()}
        super().__init__(
            "; ".join(f"{key}: {' '.join(msgs)}" for key, msgs in self.errors.items())
        )


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
    for node in nodes:
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
                f"{node.name}: rpc_port {node.rpc_port} equals api_port; "
                "pick another port."
            )
    # distinct ports among nodes sharing an address (e.g. simulated nodes on one host)
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


def _parallel_argv(
    profile: ProfileSpec, node: NodeSpec, head: NodeSpec, n: int
) -> list[str]:
    """Flags that place this node in the parallel layout."""
    argv: list[str] = []
    if node.rank == 0:
        # the OpenAI/Anthropic API listens on the node's own address
        argv += ["--host", node.host_ip]
        # the gateway and health checks call this port
        argv += ["--port", str(node.api_port)]
        if profile.mode == "dp" or profile.api_server_count > 1:
            # front-end processes on the head (vLLM's default is DP size in dp mode)
            argv += ["--api-server-count", str(profile.api_server_count)]
    else:
        # engines only: rank 0 owns the API server and the handshake/rendezvous
        argv += ["--headless"]
    if profile.mode == "dp":
        local = profile.dp // n
        if node.rank > 0:
            # first DP rank on this node; the nodes' ranges must not overlap
            argv += ["--data-parallel-start-rank", str(node.rank * local)]
        # DP replicas across the whole cluster
        argv += ["--data-parallel-size", str(profile.dp)]
        # DP replicas on this node
        argv += ["--data-parallel-size-local", str(local)]
    # TP stays inside a node, over HCCS
    argv += ["--tensor-parallel-size", str(profile.tp)]
    if profile.mode == "tp_pp":
        # PP stages across nodes, over RoCE
        argv += ["--pipeline-parallel-size", str(profile.pp)]
    if profile.expert_parallel:
        # MoE experts split over DP×TP ranks; must be on every node
        argv += ["--enable-expert-parallel"]
    if profile.mode == "dp":
        # rank 0 binds the DP handshake socket here; the others connect to it
        argv += ["--data-parallel-address", head.host_ip]
        # the same port on every node
        argv += ["--data-parallel-rpc-port", str(head.rpc_port)]
    else:
        # multiprocessing executor across nodes, no Ray cluster needed
        argv += ["--distributed-executor-backend", "mp"]
        # nodes in the torch.distributed rendezvous
        argv += ["--nnodes", str(n)]
        # this node's place; rank 0 hosts the store and the API server
        argv += ["--node-rank", str(node.rank)]
        # rendezvous address and port on rank 0
        argv += ["--master-addr", head.host_ip]
        argv += ["--master-port", str(head.rpc_port)]
    return argv


def _model_argv(profile: ProfileSpec) -> list[str]:
    """Flags that are the same on every node."""
    # the name clients put in "model"
    argv = ["--served-model-name", profile.served_model_name]
    # longest prompt + output accepted
    argv += ["--max-model-len", str(profile.max_model_len)]
    # concurrent sequences per DP replica
    argv += ["--max-num-seqs", str(profile.max_num_seqs)]
    # tokens per scheduler step (prefill chunk size)
    argv += ["--max-num-batched-tokens", str(profile.max_num_batched_tokens)]
    # share of HBM vLLM may take for weights, activations and KV cache
    argv += ["--gpu-memory-utilization", str(profile.gpu_memory_utilization)]
    # weight/activation dtype
    argv += ["--dtype", profile.dtype]
    if profile.quantization:
        # "ascend" loads vllm-ascend W8A8/W4A8 checkpoints
        argv += ["--quantization", profile.quantization]
    # explicit both ways: vLLM V1 turns prefix caching on when the flag is absent
    caching = profile.enable_prefix_caching
    argv += ["--enable-prefix-caching" if caching else "--no-enable-prefix-caching"]
    # Qwen3.5 and vllm-ascend checkpoints ship custom config code
    argv += ["--trust-remote-code"]
    return argv


def _node_env(
    profile: ProfileSpec,
    node: NodeSpec,
    used: int,
    nodes: int,
    console_health_timeout_s: int | None = None,
) -> dict[str, str]:
    env = {
        # HCCL's host-side address on this node
        "HCCL_IF_IP": node.host_ip,
        # gloo (CPU collectives), tensorpipe and HCCL's bootstrap bind this NIC
        "GLOO_SOCKET_IFNAME": node.nic_name,
        "TP_SOCKET_IFNAME": node.nic_name,
        "HCCL_SOCKET_IFNAME": node.nic_name,
        # MB per communicator, taken twice (send + receive)
        "HCCL_BUFFSIZE": str(profile.hccl_buffsize_mb),
        # vllm-ascend tutorials: do not pin OpenMP threads, one thread per worker
        "OMP_PROC_BIND": "false",
        "OMP_NUM_THREADS": "1",
        # torch_npu task queue: faster operator dispatch
        "TASK_QUEUE_ENABLE": "1",
        # less HBM fragmentation
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        # the NPUs this node's ranks use
        "ASCEND_RT_VISIBLE_DEVICES": ",".join(str(i) for i in range(used)),
    }
    # intra-server link: HCCS or RoCE
    env.update(LINK_ENV[node.link_mode])
    # HCCL / vLLM timeouts that agree with each other (engine.timeouts); extra_env wins
    aiv = profile.extra_env.get("HCCL_OP_EXPANSION_MODE", "").upper() == "AIV"
    env.update(
        timeout_env(
            nodes=nodes, aiv=aiv, console_health_timeout_s=console_health_timeout_s
        )
    )
    env.update(profile.extra_env)
    return env


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


def build_plan(
    cluster: str,
    nodes: list[NodeSpec],
    profile: ProfileSpec,
    *,
    console_health_timeout_s: int | None = None,
) -> ClusterPlan:
    """Argv and environment for every node, in rank order, plus the memory fit.

    Raises PlanError with messages keyed by field (tensor_parallel_size, nodes,
    api_port, extra_flags, extra_env, memory, ...) when the inputs cannot work.
    """
    errors: dict[str, list[str]] = defaultdict(list)
    _check_profile(profile, errors)
    _check_nodes(nodes, errors)
    if not errors:
        _check_topology(profile, nodes, errors)
    _check_extras(profile, errors)
    if errors:
        raise PlanError(errors)

    ordered = sorted(nodes, key=lambda node: node.rank)
    head = ordered[0]
    n = len(ordered)
    used_npus = profile.dp * profile.tp * profile.pp // n
    plans: list[NodePlan] = []
    for node in ordered:
        base = ["vllm", "serve", profile.model_path]
        base += _parallel_argv(profile, node, head, n) + _model_argv(profile)
        for problem in check_argv(base[2:], profile.vllm_version):
            errors["vllm_version"].append(f"{node.name}: {problem.message}")
        plans.append(
            NodePlan(
                name=node.name,
                rank=node.rank,
                role="head" if node.rank == 0 else "headless",
                argv=base + list(profile.extra_flags),
                env=_node_env(profile, node, used_npus, n, console_health_timeout_s),
            )
        )
    for refusal in link_pair_errors(plans):
        errors["link_mode"].append(refusal)
    warnings: list[str] = []
    for finding in check_timeouts(
        plans[0].env,
        nodes=n,
        world_size=profile.dp * profile.tp * profile.pp,
        console_health_timeout_s=console_health_timeout_s,
    ):
        text = f"{finding.message} (rule: {finding.source})"
        if finding.severity == "error":
            errors["extra_env"].append(text)
        else:
            warnings.append(text)
    fit = estimate_fit(
        profile, min(node.hbm_gb for node in ordered), ordered[0].npu_count, n
    )
    if not fit.fits:
        errors["memory"].append(fit.detail)
    if errors:
        raise PlanError(errors)
    return ClusterPlan(
        cluster=cluster,
        vllm_version=profile.vllm_version,
        nodes=plans,
        fit=fit,
        warnings=warnings,
    )
