"""What one ``npu-smi info`` table says: its chips (dies), its processes and the
health states a chip may be in. Separate from the reading so callers and tests can
build and compare these values without the parser."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# npu_common.c health_state_list
HEALTH_STATES = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")


@dataclass(frozen=True)
class NpuChip:
    """One chip (die) row pair of the ``npu-smi info`` table; None = absent or NA."""

    npu: int
    chip: int
    name: str
    health: str
    power_w: float | None
    temp_c: float | None
    aicore_pct: float | None
    hbm_used_mb: int | None
    hbm_total_mb: int | None
    bus_id: str | None
    phy_id: int | None = None  # A3 "Chip  Phy-ID" column
    device_id: int | None = None  # 310P "Chip    Device" column
    hugepages_used: int | None = None
    hugepages_total: int | None = None
    ddr_used_mb: int | None = None  # "Memory-Usage(MB)"; always 0 / 0 on 910B and A3
    ddr_total_mb: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NpuProcess:
    """One row of the process table; ``name`` may be "" (containerised workers)."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_mb: int
    container_pid: int | None = None  # 26.0+ "Process id in container"; NA → None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NpuSmiInfo:
    """Everything in one ``npu-smi info`` table."""

    version: str | None
    chips: list[NpuChip] = field(default_factory=list)
    processes: list[NpuProcess] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "chips": [c.to_dict() for c in self.chips],
            "processes": [p.to_dict() for p in self.processes],
        }
