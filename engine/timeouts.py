"""Timeouts that must agree across HCCL, vLLM and the console, set and checked per plan.

A layer whose timeout fires first decides what the operator sees. When vLLM gives up
before HCCL, the engine hangs or dies without the HCCL error that names the faulty
rank; when the console gives up before vLLM, it stops the engine before vLLM writes
its own timeout message. Each rule below says which must be longer, and why, with its
source. ``timeout_env`` gives the values the plan sets (a profile's ``extra_env``
overrides them); ``check_timeouts`` returns the rule violations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

# HCCL_CONNECT_TIMEOUT: integer in [120, 7200] s, default 120; the effective wait is
# the value + 20 s (CANN env-var reference, envref_07_0077 / envref_07_0149:
# https://www.hiascend.com/document/detail/zh/canncommercial/83RC1/maintenref/envvar/envref_07_0149.html).
HCCL_CONNECT_MIN_S = 120
HCCL_CONNECT_MAX_S = 7200
HCCL_CONNECT_GRACE_S = 20
# HCCL_EXEC_TIMEOUT on Atlas A2: default 1836 s (HOST/HOST_TS expansion), 0 = never;
# with HCCL_OP_EXPANSION_MODE=AIV the range is [0, 1091] and the default 1091
# (reference/ascend-facts.md §4, CANN env-var reference).
HCCL_EXEC_DEFAULT_S = 1836
HCCL_EXEC_AIV_MAX_S = 1091
# vLLM envs.py defaults.
VLLM_EXECUTE_MODEL_DEFAULT_S = 300
VLLM_ENGINE_READY_DEFAULT_S = 600
# A headless DP rank waits HANDSHAKE_TIMEOUT_MINS = 5 minutes for the head
# (vLLM v1/engine/core.py; reference/vllm-facts.md "DP / headless mode"): ranks of one
# engine may therefore reach HCCL link setup up to 300 s apart.
DP_HANDSHAKE_WINDOW_S = 300
# The console's /health wait must outlast vLLM's own engine-ready wait by this much
# (a tenth of a shorter wait): the API server still has to start listening after the
# engines are ready.
CONSOLE_MARGIN_S = 60

SOURCE_HCCL_ENV = (
    "CANN env-var reference HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT "
    "(hiascend.com envref_07_0149, envref_07_0077)"
)
SOURCE_VA_13232 = (
    "vllm-ascend PR #13232 (v0.23.0): VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS must be "
    "greater than the HCCL operator timeout, else the communication hangs without logs"
)
SOURCE_VLLM_HANDSHAKE = "vLLM v1/engine/core.py HANDSHAKE_TIMEOUT_MINS = 5"
SOURCE_VLLM_READY = "vLLM envs.py VLLM_ENGINE_READY_TIMEOUT_S (default 600 s)"


@dataclass(frozen=True)
class TimeoutFinding:
    """One broken rule: which variable, how bad, what to do, and where the rule is from."""

    key: str
    severity: str  # "error" (plan refused) | "warning"
    message: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(env: Mapping[str, str], key: str) -> int | None:
    raw = env.get(key)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def console_margin(console_health_timeout_s: int) -> int:
    """How much longer the console waits than vLLM: 60 s, or a tenth of a short wait."""
    return min(CONSOLE_MARGIN_S, max(1, console_health_timeout_s // 10))


def timeout_env(
    *, nodes: int, aiv: bool = False, console_health_timeout_s: int | None = None
) -> dict[str, str]:
    """The values the plan sets so that every rule below holds by default."""
    exec_s = HCCL_EXEC_AIV_MAX_S if aiv else HCCL_EXEC_DEFAULT_S
    # vLLM's front end waits VLLM_ENGINE_READY_TIMEOUT_S for the engine cores (vllm/envs.py,
    # default 600 s) and then raises TimeoutError; a 397B checkpoint on 4 nodes loads for
    # longer. The vllm-ascend Qwen3.5-397B-A17B tutorial sets 30000
    # (vllm-project/vllm-ascend docs/source/tutorials/models/Qwen3.5-397B-A17B.md §5.4.1
    # @182b75ea). The plan sets it below the console's own /health wait instead, so vLLM
    # says why it is not ready before the console gives up on it.
    ready = (
        1500  # a 397B model loads for many minutes; below the console's 1800 s default
    )
    if console_health_timeout_s is not None:
        ready = max(
            1,
            min(
                ready,
                console_health_timeout_s - console_margin(console_health_timeout_s),
            ),
        )
    return {
        # link setup: one node 120 s (HCCL default); several nodes twice the DP
        # handshake window, since ranks may start up to 300 s apart
        "HCCL_CONNECT_TIMEOUT": str(
            HCCL_CONNECT_MIN_S if nodes <= 1 else 2 * DP_HANDSHAKE_WINDOW_S
        ),
        # written out so the plan shows the value the rules were checked against
        "HCCL_EXEC_TIMEOUT": str(exec_s),
        # vllm-ascend PR #13232 raises it to 3000 when below 1836; set it explicitly
        "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(max(3000, exec_s + 600)),
        # vLLM gives up on its engines before the console gives up on vLLM
        "VLLM_ENGINE_READY_TIMEOUT_S": str(ready),
    }


class _Waits(NamedTuple):
    """The waits the rules compare: the environment's values, or each layer's default."""

    aiv: bool
    connect: int
    exec_s: int
    execute: int
    ready: int


def check_timeouts(
    env: Mapping[str, str],
    *,
    nodes: int,
    world_size: int,
    console_health_timeout_s: int | None = None,
) -> list[TimeoutFinding]:
    """Every rule the environment of one rank breaks (the plan gives all ranks the same)."""
    found = _unparsable(env)
    if found:
        return found
    aiv, connect, exec_s, execute, ready = _effective_waits(env)
    findings = (
        _connect_finding(connect, nodes=nodes, world_size=world_size),
        _exec_aiv_finding(exec_s, aiv=aiv),
        _execute_finding(execute, exec_s=exec_s),
        _ready_finding(ready, connect=connect, nodes=nodes),
        _console_finding(ready, console_health_timeout_s=console_health_timeout_s),
    )
    return [f for f in findings if f is not None]


def _unparsable(env: Mapping[str, str]) -> list[TimeoutFinding]:
    """One error per timeout variable set to something other than whole seconds."""
    found: list[TimeoutFinding] = []
    for key in (
        "HCCL_CONNECT_TIMEOUT",
        "HCCL_EXEC_TIMEOUT",
        "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",
        "VLLM_ENGINE_READY_TIMEOUT_S",
    ):
        if key in env and _int(env, key) is None:
            found.append(
                TimeoutFinding(
                    key,
                    "error",
                    f"{key}={env[key]!r} is not a whole number of seconds.",
                    key,
                )
            )
    return found


def _effective_waits(env: Mapping[str, str]) -> _Waits:
    """The waits in force: what the environment sets, else HCCL's and vLLM's defaults."""
    aiv = str(env.get("HCCL_OP_EXPANSION_MODE", "")).upper() == "AIV"
    connect = _int(env, "HCCL_CONNECT_TIMEOUT") or HCCL_CONNECT_MIN_S
    exec_s = _int(env, "HCCL_EXEC_TIMEOUT")
    if exec_s is None:
        exec_s = HCCL_EXEC_AIV_MAX_S if aiv else HCCL_EXEC_DEFAULT_S
    execute = _int(env, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")
    if execute is None:
        execute = VLLM_EXECUTE_MODEL_DEFAULT_S
    ready = _int(env, "VLLM_ENGINE_READY_TIMEOUT_S") or VLLM_ENGINE_READY_DEFAULT_S
    return _Waits(aiv, connect, exec_s, execute, ready)


def _connect_finding(
    connect: int, *, nodes: int, world_size: int
) -> TimeoutFinding | None:
    """HCCL_CONNECT_TIMEOUT within HCCL's range, and outlasting the DP handshake window."""
    if not HCCL_CONNECT_MIN_S <= connect <= HCCL_CONNECT_MAX_S:
        return TimeoutFinding(
            "HCCL_CONNECT_TIMEOUT", "error",
            f"HCCL_CONNECT_TIMEOUT={connect} is outside HCCL's range "
            f"[{HCCL_CONNECT_MIN_S}, {HCCL_CONNECT_MAX_S}] s.",
            SOURCE_HCCL_ENV,
        )  # fmt: skip
    if nodes > 1 and connect + HCCL_CONNECT_GRACE_S < DP_HANDSHAKE_WINDOW_S:
        return TimeoutFinding(
            "HCCL_CONNECT_TIMEOUT", "error",
            f"HCCL_CONNECT_TIMEOUT={connect} (+{HCCL_CONNECT_GRACE_S} s) is shorter than "
            f"the {DP_HANDSHAKE_WINDOW_S} s by which the {world_size} ranks on {nodes} "
            "nodes may reach HCCL link setup apart: late ranks fail with EI0006. "
            f"Set it to at least {DP_HANDSHAKE_WINDOW_S - HCCL_CONNECT_GRACE_S} "
            f"(the plan's default is {2 * DP_HANDSHAKE_WINDOW_S}).",
            f"{SOURCE_HCCL_ENV}; {SOURCE_VLLM_HANDSHAKE}",
        )  # fmt: skip
    return None


def _exec_aiv_finding(exec_s: int, *, aiv: bool) -> TimeoutFinding | None:
    """HCCL_EXEC_TIMEOUT within the AIV expansion mode's maximum."""
    if aiv and exec_s > HCCL_EXEC_AIV_MAX_S:
        return TimeoutFinding(
            "HCCL_EXEC_TIMEOUT", "error",
            f"HCCL_EXEC_TIMEOUT={exec_s} exceeds {HCCL_EXEC_AIV_MAX_S} s, the maximum "
            "with HCCL_OP_EXPANSION_MODE=AIV.",
            SOURCE_HCCL_ENV,
        )  # fmt: skip
    return None


def _execute_finding(execute: int, *, exec_s: int) -> TimeoutFinding | None:
    """HCCL's operator timeout on, and vLLM's execute_model wait outlasting it."""
    if exec_s == 0:
        return TimeoutFinding(
            "HCCL_EXEC_TIMEOUT", "warning",
            "HCCL_EXEC_TIMEOUT=0 disables HCCL's operator timeout: a lost peer is then "
            "only noticed when vLLM's execute_model RPC times out, and HCCL never "
            "reports which rank failed.",
            f"{SOURCE_HCCL_ENV}; {SOURCE_VA_13232}",
        )  # fmt: skip
    if execute <= exec_s:
        return TimeoutFinding(
            "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "error",
            f"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS={execute} is not above "
            f"HCCL_EXEC_TIMEOUT={exec_s}: vLLM gives up on execute_model before HCCL "
            "reports the failed collective, and the engine hangs without logs. Set it "
            f"above {exec_s} (vllm-ascend uses 3000).",
            SOURCE_VA_13232,
        )  # fmt: skip
    return None


def _ready_finding(ready: int, *, connect: int, nodes: int) -> TimeoutFinding | None:
    """vLLM's engine-ready wait outlasting HCCL's link setup on several nodes."""
    if nodes > 1 and ready <= connect + HCCL_CONNECT_GRACE_S:
        return TimeoutFinding(
            "VLLM_ENGINE_READY_TIMEOUT_S", "warning",
            f"VLLM_ENGINE_READY_TIMEOUT_S={ready} is not above HCCL's link-setup wait "
            f"({connect}+{HCCL_CONNECT_GRACE_S} s): the API server gives up before "
            "HCCL names the ranks that never connected (EI0006).",
            f"{SOURCE_VLLM_READY}; {SOURCE_HCCL_ENV}",
        )  # fmt: skip
    return None


def _console_finding(
    ready: int, *, console_health_timeout_s: int | None
) -> TimeoutFinding | None:
    """The console's /health wait outlasting vLLM's engine-ready wait by the margin."""
    if (
        console_health_timeout_s is not None
        and console_health_timeout_s < ready + console_margin(console_health_timeout_s)
    ):
        return TimeoutFinding(
            "VLLM_ENGINE_READY_TIMEOUT_S", "error",
            f"The console waits ENGINE_HEALTH_TIMEOUT_S={console_health_timeout_s} s for "
            f"/health, less than vLLM's VLLM_ENGINE_READY_TIMEOUT_S={ready} s + "
            f"{console_margin(console_health_timeout_s)} s: the console would stop the engine before vLLM reports "
            "why it is not ready. Lower VLLM_ENGINE_READY_TIMEOUT_S in extra_env or raise "
            "ENGINE_HEALTH_TIMEOUT_S.",
            f"{SOURCE_VLLM_READY}; console setting ENGINE_HEALTH_TIMEOUT_S",
        )  # fmt: skip
    return None
