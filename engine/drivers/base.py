"""What every engine driver shares: the data in and out, the error, the base class."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if (
    TYPE_CHECKING
):  # engine.tools imports the registry; the driver only names its result type
    from engine.tools import ToolResult

ENGINE_STATES = ("running", "stopped", "exited", "unknown")
# Real installs put hccn_tool here rather than on PATH (ascend-facts.md §3).
TOOL_DIRS = (
    "/usr/local/Ascend/driver/tools",
    "/usr/local/bin",
    "/usr/bin",
    "/usr/sbin",
)


@dataclass
class EngineSpec:
    """One node's share of a launch plan, as the agent hands it to a driver.

    ``argv`` starts with ``vllm serve <model>``; ``workdir`` is a per-node directory
    (for example ``var/agent/<node>``) where a driver may keep pid and log files.
    """

    node: str
    rank: int
    role: str
    argv: list[str]
    env: dict[str, str]
    workdir: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineSpec:
        return cls(
            node=str(data["node"]),
            rank=int(data["rank"]),
            role=str(data["role"]),
            argv=[str(a) for a in data["argv"]],
            env={str(k): str(v) for k, v in dict(data.get("env") or {}).items()},
            workdir=str(data["workdir"]),
        )


@dataclass
class EngineStatus:
    """What a driver knows about one node's engine right now.

    ``state`` is one of "running", "stopped" (never started, or stopped by the driver),
    "exited" (ended on its own; ``exit_code`` says how, when known) or "unknown".
    """

    state: str
    pid: int | None = None
    uptime_s: float | None = None
    exit_code: int | None = None
    log_tail: list[str] = field(default_factory=list)
    rss_mb: float | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineStatus:
        return cls(
            state=str(data["state"]),
            pid=data.get("pid"),
            uptime_s=data.get("uptime_s"),
            exit_code=data.get("exit_code"),
            log_tail=list(data.get("log_tail") or []),
            rss_mb=data.get("rss_mb"),
            detail=str(data.get("detail") or ""),
        )


class DriverError(Exception):
    """A driver could not do what was asked.

    ``permanent=True`` means retrying the same request will fail the same way
    (bad argv, missing binary, unit file not writable); the caller should not retry.
    """

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


class Driver:
    """How the agent meets its node: one node's ``vllm serve`` (start, stop, status,
    logs; subclasses implement them) and the node around it (tools, versions, files).

    The node hooks below are what a real Ascend server does; the simulator's driver
    (engine.drivers.sim) overrides them, so no other engine module asks "is this the sim?".
    """

    name: str = ""
    # where engine.tools looks for a tool that is not on PATH
    tool_dirs: tuple[str, ...] = TOOL_DIRS
    # stop the engine when the agent exits (systemd keeps a real node serving through it)
    engine_dies_with_agent: bool = False

    def start(self, spec: EngineSpec) -> EngineStatus:
        """Spawn the engine and return once it is spawned (not once healthy).

        Raises DriverError if it is already running, or if it exits within about a
        second (the message carries its log tail).
        """
        raise NotImplementedError

    def stop(self, spec: EngineSpec, *, grace_s: float = 30.0) -> EngineStatus:
        """Stop the engine (TERM, then KILL after ``grace_s``); idempotent."""
        raise NotImplementedError

    def status(self, spec: EngineSpec) -> EngineStatus:
        """Return the engine's current state; never raises for a missing engine."""
        raise NotImplementedError

    def logs(self, spec: EngineSpec, lines: int = 200) -> list[str]:
        """Return the last ``lines`` lines of the engine's log ([] if none)."""
        raise NotImplementedError

    # -- the node around the engine ---------------------------------------------------

    def workdir(self, node: str, environ: Mapping[str, str]) -> Path:
        """The agent's per-node directory (pid, log and plan files)."""
        return Path(environ.get("AGENT_WORKDIR") or f"/var/lib/ascend-agent/{node}")

    def prepare_node(self, node: str, workdir: Path) -> None:
        """Ready the node before the agent's first task; a real node needs nothing."""

    def answers(self, node: str) -> bool:
        """False when the agent must play dead (a simulated ``agent-stop`` fault)."""
        return True

    def run_tool(self, argv: list[str]) -> ToolResult | None:
        """Answer a tool call without running a binary; None runs the real one."""
        return None

    def bench_command(self, argv: list[str]) -> list[str]:
        """The argv that runs ``vllm bench serve …`` (engine/bench_serve.py) on this node:
        the ``vllm`` on the agent's PATH, the one ``vllm serve`` runs from."""
        return list(argv)

    def versions(self) -> dict[str, str | None] | None:
        """Driver/firmware/CANN/package versions when known without asking the tools."""
        return None

    def hccn_conf(self) -> Path | None:
        """Where this node's hccn.conf lives, when not /etc/hccn.conf."""
        return None

    def model_dir(self, path: str, node: str | None = None) -> Path:
        """Where ``path`` (as the plan names it) is on this node's disk."""
        return Path(path)

    def home_dir(self, node: str) -> Path:
        """The home directory whose ``ascend/log`` holds the node's CANN logs (plogs)."""
        return Path.home()

    def leave_crash_traces(self, node: str, log: Path, pid: int) -> None:
        """What a rank killed by a device fault leaves behind; a real crash writes its own."""

    def fault_inject(self, node: str, fault: str, value: str | None) -> dict[str, Any]:
        """Inject a simulated fault; refused on real hardware."""
        raise PermissionError(self._no_faults(node))

    def fault_clear(self, node: str) -> dict[str, Any]:
        raise PermissionError(self._no_faults(node))

    def sim_state(self, node: str) -> dict[str, Any]:
        raise PermissionError(self._no_faults(node))

    def _no_faults(self, node: str) -> str:
        return f"fault injection is refused: {node} runs the {self.name} driver, not the simulator"
