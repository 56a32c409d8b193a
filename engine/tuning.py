"""Tuning options a profile may take, from the vllm-ascend Qwen3.5-397B-A17B tutorial.

Source: vllm-project/vllm-ascend ``docs/source/tutorials/models/Qwen3.5-397B-A17B.md``
@182b75ea, §5.2 "Multi-Node Deployment with MP" (the flags on both nodes' ``vllm
serve``) and its "Key parameters" notes; §5.1's notes explain the compilation and
additional config. Every option is checked against the shipped flag lists of the
profile's vLLM version (engine/flags.py) before it is offered.

An option is either extra ``vllm serve`` flags (appended to the profile's
``extra_flags``) or a profile field the plan already turns into a flag
(``enable_prefix_caching`` → ``--no-enable-prefix-caching``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.flags import SUPPORTED_VERSIONS, check_argv

TUTORIAL = (
    "vllm-project/vllm-ascend docs/source/tutorials/models/Qwen3.5-397B-A17B.md "
    "@182b75ea"
)


@dataclass(frozen=True)
class TuningOption:
    key: str
    reason: str
    source: str
    flags: tuple[str, ...] = ()  # appended to extra_flags
    profile_fields: dict[str, Any] = field(default_factory=dict)
    multi_node_only: bool = False

    def argv(self) -> list[str]:
        """The flags this option puts on ``vllm serve`` (for the flag-list check)."""
        if self.profile_fields.get("enable_prefix_caching") is False:
            return [*self.flags, "--no-enable-prefix-caching"]
        return list(self.flags)


TUNING_OPTIONS: tuple[TuningOption, ...] = (
    TuningOption(
        key="full_decode_graph",
        flags=("--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}'),
        reason=(
            "Replays full decode steps as ACL graphs, which cuts operator dispatch "
            "overhead during decode."
        ),
        source=f"{TUTORIAL} §5.1 notes, §5.2",
    ),
    TuningOption(
        key="cpu_binding_and_shared_expert_overlap",
        flags=(
            "--additional-config",
            '{"enable_cpu_binding":true,"multistream_overlap_shared_expert":true}',
        ),
        reason=(
            "enable_cpu_binding binds workers to CPUs the Ascend way; "
            "multistream_overlap_shared_expert overlaps the shared expert's compute for "
            "throughput on MoE models."
        ),
        source=f"{TUTORIAL} §5.2 and its key parameters",
    ),
    TuningOption(
        key="fixed_seed",
        flags=("--seed", "1024"),
        reason=(
            "The tutorial starts every node with the same fixed seed, so seeded sampling "
            "is reproducible across restarts of the engine."
        ),
        source=f"{TUTORIAL} §5.2",
    ),
    TuningOption(
        key="no_prefix_caching_multi_node",
        profile_fields={"enable_prefix_caching": False},
        reason=(
            "The multi-node recipe turns prefix caching off; the single-node notes warn "
            "that with Qwen3.5's hybrid KV cache short prefixes may not be cached anyway."
        ),
        source=f"{TUTORIAL} §5.1 notes, §5.2",
        multi_node_only=True,
    ),
)


OPTIONS_BY_KEY: dict[str, TuningOption] = {o.key: o for o in TUNING_OPTIONS}


def tuning_problems(
    keys: list[str], vllm_version: str, extra_flags: list[str]
) -> list[str]:
    """Why the chosen option ``keys`` cannot be used with this version and these extra
    flags (empty when they can): unknown keys, flags the version lacks, a flag that
    ``extra_flags`` sets already."""
    out = []
    for key in keys:
        option = OPTIONS_BY_KEY.get(key)
        if option is None:
            out.append(
                f"unknown tuning option {key!r}; choose from {', '.join(OPTIONS_BY_KEY)}"
            )
            continue
        if vllm_version in SUPPORTED_VERSIONS:
            out += [
                f"{key}: {p.message}"
                for p in check_argv(["model", *option.argv()], vllm_version)
            ]
        if option.flags and option.flags[0] in extra_flags:
            out.append(
                f"{key}: extra flags set {option.flags[0]} already; remove one of the two"
            )
    return out


def apply_tuning(keys: list[str], *, nodes: int) -> tuple[list[str], dict[str, Any]]:
    """The extra ``vllm serve`` flags and profile-field overrides of the chosen options
    on ``nodes`` servers (a multi-node-only option does nothing on one server)."""
    flags: list[str] = []
    fields: dict[str, Any] = {}
    for key in keys:
        option = OPTIONS_BY_KEY.get(key)
        if option is None or (option.multi_node_only and nodes < 2):
            continue
        flags += option.flags
        fields.update(option.profile_fields)
    return flags, fields


def tuning_options(vllm_version: str, *, nodes: int) -> list[dict[str, Any]]:
    """The options for a profile of ``vllm_version`` on ``nodes`` servers.

    Each: key, reason, source, flags, profile_fields, applies (False for a
    multi-node-only option on one node) and problems (flag-list refusals for this
    version; an option with problems must not be offered).
    """
    out = []
    for option in TUNING_OPTIONS:
        problems = (
            [p.message for p in check_argv(["model", *option.argv()], vllm_version)]
            if vllm_version in SUPPORTED_VERSIONS
            else [f"vLLM {vllm_version} is not supported"]
        )
        out.append(
            {
                **asdict(option),
                "flags": list(option.flags),
                "applies": nodes > 1 or not option.multi_node_only,
                "problems": problems,
            }
        )
    return out
