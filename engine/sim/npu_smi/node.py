"""What every part of the fake ``npu-smi`` shares: the node it reads, its errors, its key/value line.

Separate from the renderers and the argv handling because both sides use it: the
renderers read a :class:`Node` and print ``kv`` lines, the command line raises
:class:`UsageError` with the real tool's exit statuses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sim import hardware, state

# exit statuses: the real tool exits with its negative NPU_ERR_CODE_* value (& 0xff)
EXIT_INVALID_PARAMETER = (-9001) & 0xFF
EXIT_INNER_ERR = (-9005) & 0xFF
EXIT_NOT_SUPPORT = (-9255) & 0xFF
EXIT_DCMI_INIT = (-8005) & 0xFF


class UsageError(Exception):
    """Bad command line; ``exit_code`` is what the real tool returns."""

    def __init__(self, message: str, exit_code: int = EXIT_INVALID_PARAMETER) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Node:
    """Everything one invocation reads from the node directory."""

    cfg: state.NodeConfig
    faults: state.Faults
    engine: dict[str, Any]
    counters: dict[str, Any]
    now: float

    @property
    def chips(self) -> list[hardware.ChipReading]:
        return hardware.chip_readings(self.cfg, self.faults, self.engine, self.now)


def load_node(d: Path, now: float | None = None) -> Node:
    """Read the node's state files (never raises on missing/broken files)."""
    return Node(
        cfg=state.load_config(d),
        faults=state.load_faults(d),
        engine=state.read_engine(d),
        counters=state.load_counters(d),
        now=time.time() if now is None else now,
    )


def kv(key: str, value: object) -> str:
    return f"\t{key:<30} : {value}"
