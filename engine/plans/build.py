"""build_plan: every node's argv and environment, checked for the vLLM version, plus the memory fit."""

from __future__ import annotations

from collections import defaultdict

from engine.flags import check_argv
from engine.memory import estimate_fit
from engine.plans.argv import _model_argv, _node_env, _parallel_argv
from engine.plans.checks import (
    _check_extras,
    _check_nodes,
    _check_profile,
    _check_topology,
    link_pair_errors,
)
from engine.plans.specs import ClusterPlan, NodePlan, NodeSpec, PlanError, ProfileSpec
from engine.timeouts import check_timeouts


def _check_inputs(
    profile: ProfileSpec, nodes: list[NodeSpec], errors: dict[str, list[str]]
) -> None:
    """Check profile, nodes, topology and extras; raise PlanError if any failed."""
    _check_profile(profile, errors)
    _check_nodes(nodes, errors)
    if not errors:
        _check_topology(profile, nodes, errors)
    _check_extras(profile, errors)
    if errors:
        raise PlanError(errors)


def _node_plans(
    profile: ProfileSpec,
    ordered: list[NodeSpec],
    errors: dict[str, list[str]],
    console_health_timeout_s: int | None,
) -> list[NodePlan]:
    """One NodePlan per node in rank order; flags the version refuses go to errors."""
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
    return plans


def _timeout_warnings(
    plans: list[NodePlan],
    profile: ProfileSpec,
    n: int,
    console_health_timeout_s: int | None,
    errors: dict[str, list[str]],
) -> list[str]:
    """Timeout rules on rank 0's env: errors go to errors["extra_env"], risks returned."""
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
    return warnings


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
    _check_inputs(profile, nodes, errors)

    ordered = sorted(nodes, key=lambda node: node.rank)
    n = len(ordered)
    plans = _node_plans(profile, ordered, errors, console_health_timeout_s)
    for refusal in link_pair_errors(plans):
        errors["link_mode"].append(refusal)
    warnings = _timeout_warnings(plans, profile, n, console_health_timeout_s, errors)
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
