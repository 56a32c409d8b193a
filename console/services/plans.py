"""Bridge from the inventory (Django models) to engine/'s pure launch plans."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from console.models import Cluster, EngineProfile, Node
from engine.capabilities import capability
from engine.drivers.container import container_env
from engine.memory import model_facts_from_config
from engine.plans import ClusterPlan, NodeSpec, PlanError, ProfileSpec, build_plan
from engine.tuning import apply_tuning


def profile_spec(
    profile: EngineProfile,
    model_config: dict[str, Any] | None = None,
    *,
    nodes: int = 2,
) -> ProfileSpec:
    """The engine's view of a profile; model facts from config.json win: the one the
    nodes reported (``model_config``, console/services/weights.py), else a config.json
    under the path on this machine. The profile's tuning options (engine/tuning.py)
    add their flags for a cluster of ``nodes`` servers."""
    tuning_flags, tuning_fields = apply_tuning(list(profile.tuning or []), nodes=nodes)
    facts = {
        "total_params_b": profile.total_params_b,
        "active_params_b": profile.active_params_b,
        "num_layers": profile.num_layers,
        "num_experts": profile.num_experts,
        "hidden_size": profile.hidden_size,
        "num_kv_heads": profile.num_kv_heads,
        "head_dim": profile.head_dim,
    }
    from_config = (
        model_config
        if model_config is not None
        else model_facts_from_config(profile.model_path) or {}
    )
    facts.update({k: v for k, v in from_config.items() if k in facts})
    return ProfileSpec(
        name=profile.name,
        model_path=profile.model_path,
        served_model_name=profile.served_model_name,
        vllm_version=profile.vllm_version,
        mode=profile.mode,
        dp=profile.data_parallel_size,
        tp=profile.tensor_parallel_size,
        pp=profile.pipeline_parallel_size,
        expert_parallel=profile.expert_parallel,
        dtype=profile.dtype,
        quantization=profile.quantization or None,
        max_model_len=profile.max_model_len,
        max_num_seqs=profile.max_num_seqs,
        max_num_batched_tokens=profile.max_num_batched_tokens,
        gpu_memory_utilization=profile.gpu_memory_utilization,
        enable_prefix_caching=tuning_fields.get(
            "enable_prefix_caching", profile.enable_prefix_caching
        ),
        api_server_count=profile.api_server_count,
        extra_flags=[*(profile.extra_flags or []), *tuning_flags],
        extra_env=dict(profile.extra_env or {}),
        hccl_buffsize_mb=profile.hccl_buffsize_mb,
        kv_layers=from_config.get("kv_layers") or profile.kv_layers,
        **facts,  # type: ignore[arg-type]
    )


def node_spec(
    node: Node, *, rank: int | None = None, link_mode: str | None = None
) -> NodeSpec:
    """The engine's view of a node; ``rank``/``link_mode`` override the inventory (node replacement, failover)."""
    effective_rank = node.rank if rank is None else rank
    return NodeSpec(
        name=node.name,
        rank=int(effective_rank if effective_rank is not None else -1),
        role="head" if effective_rank == 0 else "worker",
        host_ip=node.management_ip,
        nic_name=node.nic_name,
        npu_count=node.npu_count,
        hbm_gb=float(node.hbm_per_npu_gb),
        npu_ips=list(node.npu_ips or []),
        api_port=node.api_port,
        rpc_port=node.rpc_port,
        link_mode=link_mode or node.link_mode,
        driver=node.driver,
    )


def cluster_plan(
    cluster: Cluster,
    *,
    nodes: Iterable[NodeSpec] | None = None,
    profile: EngineProfile | None = None,
    model_config: dict[str, Any] | None = None,
) -> ClusterPlan:
    """Build the plan for a cluster (its members in rank order unless ``nodes`` is given).

    Raises engine.plans.PlanError with field-keyed messages when it cannot work.
    """
    specs = (
        list(nodes)
        if nodes is not None
        else [node_spec(n) for n in cluster.ranked_nodes()]
    )
    profile = profile or cluster.profile
    plan = build_plan(
        cluster.name,
        specs,
        profile_spec(profile, model_config, nodes=len(specs)),
        # the console's own /health wait must outlast vLLM's (engine.timeouts)
        console_health_timeout_s=settings.ENGINE_HEALTH_TIMEOUT_S,
    )
    return with_container_images(plan, cluster, profile)


def with_container_images(
    plan: ClusterPlan, cluster: Cluster, profile: EngineProfile
) -> ClusterPlan:
    """Container-driver ranks get the image of the profile's vllm-ascend release for
    their hardware (A3 servers run the ``-a3`` image; engine/compat.py)."""
    drivers = [Node.Driver.CONTAINER] + (
        [Node.Driver.SIM] if settings.SIM_CONTAINERS else []
    )
    nodes = (
        {n.name: n for n in cluster.nodes.filter(driver__in=drivers)}
        if cluster.pk
        else {}
    )
    for rank in plan.nodes:
        node = nodes.get(rank.name)
        if node is None:
            continue
        family = capability(node.effective_server_model).family
        try:
            rank.env = container_env(
                rank.env,
                cluster=cluster.name,
                vllm_ascend_version=profile.vllm_ascend_version,
                hardware="a3" if family == "A3" else "a2",
            )
        except ValueError as exc:
            raise PlanError({"vllm_ascend_version": [str(exc)]}) from None
    return plan
