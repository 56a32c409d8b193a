"""The plan's inputs and outputs: node and profile specs, node and cluster plans, PlanError."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.memory import FitReport

MODES = ("dp", "tp_pp")


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
