"""What the head and the headless processes share: the simulator's settings from the
environment (:class:`Env`), the node-state :class:`Reporter`, the crash fault, and a
:class:`Run` with the exit-code future the first cause resolves.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.sim import state
from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.logs import VllmLog


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise SystemExit(
            f"{name}={raw!r} is not a number; set it to seconds (e.g. 0.05)"
        ) from None


@dataclass
class Env:
    """Simulator settings from the environment."""

    time_scale: float = 1.0
    load_s: float = 3.0
    headless_timeout_s: float = 300.0
    dead_exit_s: float = 1.0
    link_mode: str = "hccs"
    node_dir: Path | None = None
    node: str = field(
        default_factory=lambda: (
            os.environ.get("SIM_NODE") or os.environ.get("NODE_NAME") or ""
        )
    )

    @classmethod
    def from_env(cls) -> Env:
        scale = _env_float("SIM_TIME_SCALE", 1.0)
        d = state.node_dir() if os.environ.get("SIM_STATE_DIR") and cls().node else None
        return cls(
            time_scale=scale,
            load_s=_env_float("SIM_LOAD_S", 3.0),
            headless_timeout_s=_env_float("SIM_HEADLESS_TIMEOUT_S", 300.0 * scale),
            dead_exit_s=_env_float("SIM_DEAD_EXIT_S", 1.0),
            link_mode="roce"
            if os.environ.get("HCCL_INTRA_ROCE_ENABLE") == "1"
            else "hccs",
            node_dir=d,
        )

    def link(self, faults: state.Faults) -> tuple[str, float]:
        """(link the intra-server traffic really uses, HCCS loss it suffers).

        HCCL_INTRA_ROCE_ENABLE=1 moves traffic to RoCE only where the server model
        honours it (engine/capabilities/servers.py: a Box16 does, the demo's 800T A2 does not);
        HCCS loss slows only traffic that is still on HCCS.
        """
        honours = (
            self.node_dir is None or state.load_config(self.node_dir).honours_switch()
        )
        mode = "roce" if self.link_mode == "roce" and honours else "hccs"
        return mode, faults.hccs_loss_pct if mode == "hccs" else 0.0

    def faults(self) -> state.Faults:
        return (
            state.load_faults(self.node_dir)
            if self.node_dir is not None
            else state.Faults()
        )

    def hbm_total_mb(self) -> int:
        return (
            state.load_config(self.node_dir).hbm_total_mb
            if self.node_dir is not None
            else 65536
        )


class Reporter:
    """EngineReporter.report every 0.5 s when SIM_STATE_DIR is set, else a no-op."""

    def __init__(self, env: Env, args: ServeArgs, role: str) -> None:
        self.env = env
        self.hbm_mb = int(args.gpu_memory_utilization * env.hbm_total_mb())
        self.rep = None
        if env.node_dir is not None:
            rank = args.my_ranks[0] if args.my_ranks else 0
            self.rep = state.EngineReporter(
                env.node_dir,
                pid=os.getpid(),
                rank=rank,
                role=role,
                link_mode=env.link_mode,
            )

    def report(self, phase: str, load: float) -> None:
        if self.rep is not None:
            hbm = (
                self.hbm_mb
                if phase in ("ready", "waiting_for_ranks", "dead")
                else self.hbm_mb // 3
            )
            self.rep.report(phase=phase, load=load, hbm_used_mb=hbm)

    def close(self) -> None:
        if self.rep is not None:
            self.rep.close()


async def crash(
    env: Env, log: VllmLog, faults: state.Faults, reporter: Reporter
) -> int:
    """The crash fault: a moment of loading, then a real HCCL init failure; "once" is
    consumed by this start. Returns the exit code, 1."""
    reporter.report("loading", 0.0)
    await asyncio.sleep(0.3 * env.time_scale)
    reporter.close()
    worker = f"(VllmWorker rank=0 pid={os.getpid()}) "
    log.error("multiproc_executor.py:522", "WorkerProc failed to start.")
    print(
        f"{worker}ERROR [multiproc_executor.py:522] RuntimeError: "
        "create_config:build/CMakeFiles/torch_npu.dir/"
        "compiler_depend.ts:148 HCCL function error: "
        "hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, "
        "config, &(comm->hcclComm_)), error code is 1",
        flush=True,
    )
    print(
        f"{worker}ERROR [multiproc_executor.py:522] [ERROR] (PID:{os.getpid()}, "
        "Device:0, RankID:-1) "
        "ERR02200 DIST call hccl api failed.",
        flush=True,
    )
    log.error("core.py:708", "EngineCore failed to start.")
    if faults.crash == "once" and env.node_dir is not None:
        faults.crash = None
        state.save_faults(env.node_dir, faults)
    return 1


def resolve(fut: asyncio.Future[int], code: int) -> None:
    """Set the process exit code once (the first cause wins)."""
    if not fut.done():
        fut.set_result(code)


@dataclass(eq=False)
class Run:
    """One run of a sim process: what it started with, and the future its exit code
    lands in (see :func:`resolve`). Subclasses set up the rest in __post_init__."""

    args: ServeArgs
    env: Env
    log: VllmLog
    faults: state.Faults
    reporter: Reporter
    done: asyncio.Future[int] = field(init=False)

    def __post_init__(self) -> None:
        self.done = asyncio.get_running_loop().create_future()
