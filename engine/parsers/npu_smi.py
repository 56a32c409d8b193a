"""Parse ``npu-smi`` output: the ``npu-smi info`` table, ``-t <type>`` key : value
lists, ``-t hccs`` link counters, ``-l`` and ``-m``.

The table layouts handled (ascend-facts.md §1.2–§1.3, samples in tests/data/ascend):
98-column 910B (drivers 23.0–25.3), 116-column wide 26.0 (extra "Process id in
container" column), A3 (``Chip  Phy-ID``, two dies per NPU, second die's power
``-``), 310P (``Chip    Device``, no HBM column, power ``NA``). Copies from docs
may be indented and may elide rows with ``...``; both are tolerated, nothing is
guessed. The key : value and HCCS parsers live in npu_smi_kv/ and hccs.py and
are re-exported here so callers import one module.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.parsers import ParseError
from engine.parsers._common import (
    check_npu_smi_unsupported,
    is_elision,
    numbered,
    require_text,
    to_int,
    to_opt_float,
    to_opt_int,
)
from engine.parsers.hccs import HccsLink, HccsStatus, hccs_loss, parse_hccs
from engine.parsers.npu_smi_kv import (
    BoardInfo,
    ChipMapping,
    ChipMemory,
    ChipPower,
    ChipTemp,
    ChipUsage,
    HealthInfo,
    NpuListEntry,
    parse_board,
    parse_health,
    parse_kv,
    parse_list,
    parse_mapping,
    parse_memory,
    parse_power,
    parse_temp,
    parse_usages,
)

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


_SEPARATOR = re.compile(r"^\+[-=+]*\+$")
_VERSION = re.compile(r"^npu-smi\s+\S+\s+Version:\s*(\S+)$")
_NO_PROCS = re.compile(r"^No running processes found in NPU (\d+)$")
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_PAIR = r"(\d+)\s*/\s*(\d+)"  # "3418 / 65536" and the 5-digit "58626/ 65536"
_LINE1_VALUES = re.compile(rf"^(\S+)\s+(\S+)\s+{_PAIR}$")
_LINE2_HBM = re.compile(rf"^(\S+)\s+{_PAIR}\s+{_PAIR}$")
_LINE2_NO_HBM = re.compile(rf"^(\S+)\s+{_PAIR}$")


@dataclass
class _Layout:
    chip_column: str = ""  # "" (910B), "Phy-ID" (A3) or "Device" (310P)
    has_hbm: bool = False
    header_line: int = 0


@dataclass
class _Pending:
    line: int
    npu: int
    name: str
    health: str
    power_w: float | None
    temp_c: float | None
    hugepages_used: int
    hugepages_total: int


def parse_info(text: str) -> NpuSmiInfo:
    """Parse ``npu-smi info``. Raises ParseError naming the line on anything unknown."""
    require_text(text, "npu-smi info")
    check_npu_smi_unsupported(text)
    table = _InfoTable(raw=text)
    for lineno, line in numbered(text):
        s = line.strip()
        if not s or is_elision(s) or s.startswith("[WARNING]"):
            continue
        table.check_width(s, lineno)
        if _SEPARATOR.match(s):
            table.require_no_pending()
            continue
        if len(s) < 2 or not (s.startswith("|") and s.endswith("|")):
            raise ParseError("unrecognized npu-smi info line", raw=text, line=lineno)
        cells = [c.strip() for c in s[1:-1].split("|")]
        if not table.read_header(cells, lineno):
            table.read_row(cells, lineno)
    return table.result()


@dataclass
class _InfoTable:
    """What parse_info has read of one ``npu-smi info`` table so far, line by line."""

    raw: str
    version: str | None = None
    layout: _Layout | None = None
    seen_first_header: bool = False
    in_processes: bool = False
    proc_columns: int = 0
    width: int | None = None
    pending: _Pending | None = None  # a chip's first row, waiting for its second
    chips: list[NpuChip] = field(default_factory=list)
    processes: list[NpuProcess] = field(default_factory=list)

    def check_width(self, s: str, lineno: int) -> None:
        """Refuse a line whose width differs from the table's (the first line sets it)."""
        # npu-smi pads every line to one width (98 on 910B, 116 wide, 106 on 310P);
        # only process rows may overflow (a long process name is not truncated)
        if self.width is None:
            self.width = len(s)
        elif len(s) != self.width and not (self.in_processes and "No running" not in s):
            raise ParseError(
                f"table line is {len(s)} characters wide, the table is {self.width}",
                raw=self.raw,
                line=lineno,
            )

    def require_no_pending(self) -> None:
        """Refuse a chip's first row left without its second."""
        if self.pending is not None:
            raise ParseError(
                "chip row without its second line", raw=self.raw, line=self.pending.line
            )

    def read_header(self, cells: list[str], lineno: int) -> bool:
        """Take the version line or a header (True); False leaves a data row to read_row."""
        if len(cells) == 1 and cells[0].startswith("npu-smi"):
            m = _VERSION.match(cells[0])
            if not m:
                raise ParseError(
                    "unrecognized npu-smi version line", raw=self.raw, line=lineno
                )
            self.version = m.group(1)
            return True
        first = cells[0].split()
        if first[:2] == ["NPU", "Name"]:
            if len(cells) != 3 or not cells[1].startswith("Health"):
                raise ParseError(
                    "unsupported npu-smi info header layout", raw=self.raw, line=lineno
                )
            self.seen_first_header = True
            return True
        if (
            first
            and first[0] == "Chip"
            and self.seen_first_header
            and not self.in_processes
        ):
            self.layout = _header_layout(cells, first, self.raw, lineno)
            return True
        if (
            first[:2] == ["NPU", "Chip"]
            and len(cells) >= 2
            and cells[1] == "Process id"
        ):
            self.start_processes(cells, lineno)
            return True
        if first[:2] == ["NPU", "ID"]:
            raise ParseError(
                "unsupported npu-smi info layout (950-style header)",
                raw=self.raw,
                line=lineno,
            )
        return False

    def start_processes(self, cells: list[str], lineno: int) -> None:
        """Switch to the process table, whose header sets its 4 or 5 columns."""
        self.require_no_pending()
        self.in_processes = True
        self.proc_columns = len(cells)
        if self.proc_columns not in (4, 5):
            raise ParseError(
                "unsupported process table header", raw=self.raw, line=lineno
            )

    def read_row(self, cells: list[str], lineno: int) -> None:
        """A process row, or a chip's first or second row."""
        if self.in_processes:
            if len(cells) == 1 and _NO_PROCS.match(cells[0]):
                return
            self.processes.append(
                _process_row(cells, self.proc_columns, self.raw, lineno)
            )
            return
        if self.layout is None:
            raise ParseError(
                "data row before the npu-smi info header", raw=self.raw, line=lineno
            )
        if self.pending is None:
            self.pending = _chip_line1(cells, self.raw, lineno)
        else:
            self.chips.append(
                _chip_line2(self.pending, cells, self.layout, self.raw, lineno)
            )
            self.pending = None

    def result(self) -> NpuSmiInfo:
        """The table read, once it has a complete header and at least one chip."""
        self.require_no_pending()
        if self.layout is None:
            raise ParseError("no npu-smi info table header found", raw=self.raw)
        if not self.chips:
            raise ParseError(
                "npu-smi info table has no chip rows",
                raw=self.raw,
                line=self.layout.header_line,
            )
        return NpuSmiInfo(
            version=self.version, chips=self.chips, processes=self.processes
        )


def _header_layout(
    cells: list[str], first: list[str], raw: str, lineno: int
) -> _Layout:
    if (
        len(cells) != 3
        or not cells[1].startswith("Bus-Id")
        or not cells[2].startswith("AICore")
    ):
        raise ParseError("unsupported npu-smi info header layout", raw=raw, line=lineno)
    if first not in (["Chip"], ["Chip", "Phy-ID"], ["Chip", "Device"]):
        raise ParseError("unsupported npu-smi info chip column", raw=raw, line=lineno)
    return _Layout(
        chip_column=first[1] if len(first) == 2 else "",
        has_hbm="HBM-Usage" in cells[2],
        header_line=lineno,
    )


def _chip_line1(cells: list[str], raw: str, lineno: int) -> _Pending:
    if len(cells) != 3:
        raise ParseError("expected 3 columns in chip row", raw=raw, line=lineno)
    m = re.fullmatch(r"(\d+)\s+(\S.*)", cells[0])
    if not m:
        raise ParseError("expected 'NPU Name' in chip row", raw=raw, line=lineno)
    health = cells[1]
    if health not in HEALTH_STATES:
        raise ParseError(f"unknown health state {health!r}", raw=raw, line=lineno)
    v = _LINE1_VALUES.match(cells[2])
    if not v:
        raise ParseError(
            "expected 'Power Temp Hugepages used / total'", raw=raw, line=lineno
        )
    return _Pending(
        line=lineno,
        npu=int(m.group(1)),
        name=m.group(2).strip(),
        health=health,
        power_w=to_opt_float(v.group(1), what="Power(W)", raw=raw, line=lineno),
        temp_c=to_opt_float(v.group(2), what="Temp(C)", raw=raw, line=lineno),
        hugepages_used=int(v.group(3)),
        hugepages_total=int(v.group(4)),
    )


def _chip_line2(
    p: _Pending, cells: list[str], layout: _Layout, raw: str, lineno: int
) -> NpuChip:
    if len(cells) != 3:
        raise ParseError("expected 3 columns in chip second row", raw=raw, line=lineno)
    ids = cells[0].split()
    want = 2 if layout.chip_column else 1
    if len(ids) != want or not all(i.isdigit() for i in ids):
        raise ParseError(f"expected {want} id(s) in chip column", raw=raw, line=lineno)
    bus_id: str | None = None
    if cells[1] != "NA":
        if not _BUS_ID.match(cells[1]):
            raise ParseError(f"bad PCIe bus id {cells[1]!r}", raw=raw, line=lineno)
        bus_id = cells[1]
    pattern = _LINE2_HBM if layout.has_hbm else _LINE2_NO_HBM
    v = pattern.match(cells[2])
    if not v:
        raise ParseError(
            "expected 'AICore Memory used / total [HBM used / total]'",
            raw=raw,
            line=lineno,
        )
    groups = v.groups()
    second = int(ids[1]) if len(ids) == 2 else None
    return NpuChip(
        npu=p.npu,
        chip=int(ids[0]),
        name=p.name,
        health=p.health,
        power_w=p.power_w,
        temp_c=p.temp_c,
        aicore_pct=to_opt_float(groups[0], what="AICore(%)", raw=raw, line=lineno),
        hbm_used_mb=int(groups[3]) if layout.has_hbm else None,
        hbm_total_mb=int(groups[4]) if layout.has_hbm else None,
        bus_id=bus_id,
        phy_id=second if layout.chip_column == "Phy-ID" else None,
        device_id=second if layout.chip_column == "Device" else None,
        hugepages_used=p.hugepages_used,
        hugepages_total=p.hugepages_total,
        ddr_used_mb=int(groups[1]),
        ddr_total_mb=int(groups[2]),
    )


def _process_row(cells: list[str], columns: int, raw: str, lineno: int) -> NpuProcess:
    if len(cells) != columns:
        raise ParseError(
            f"expected {columns} columns in process row", raw=raw, line=lineno
        )
    ids = re.fullmatch(r"(\d+)\s+(\d+)", cells[0])
    if not ids:
        raise ParseError("expected 'NPU Chip' in process row", raw=raw, line=lineno)
    container_pid = None
    if columns == 5:
        container_pid = to_opt_int(
            cells[4], what="Process id in container", raw=raw, line=lineno
        )
    return NpuProcess(
        npu=int(ids.group(1)),
        chip=int(ids.group(2)),
        pid=to_int(cells[1], what="Process id", raw=raw, line=lineno),
        name=cells[2],
        memory_mb=to_int(cells[3], what="Process memory(MB)", raw=raw, line=lineno),
        container_pid=container_pid,
    )


__all__ = [
    "HEALTH_STATES",
    "BoardInfo",
    "ChipMapping",
    "ChipMemory",
    "ChipPower",
    "ChipTemp",
    "ChipUsage",
    "HccsLink",
    "HccsStatus",
    "HealthInfo",
    "NpuChip",
    "NpuListEntry",
    "NpuProcess",
    "NpuSmiInfo",
    "hccs_loss",
    "parse_board",
    "parse_hccs",
    "parse_health",
    "parse_info",
    "parse_kv",
    "parse_list",
    "parse_mapping",
    "parse_memory",
    "parse_power",
    "parse_temp",
    "parse_usages",
]
