"""What every engine driver shares: the data in and out, the error, the base class."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ENGINE_STATES = ("running", "stopped", "exited", "unknown")


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
    """Starts, stops and inspects one node's ``vllm serve``; subclasses implement it."""

    name: str = ""

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
