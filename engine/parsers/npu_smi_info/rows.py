"""One row of the ``npu-smi info`` table at a time: the chip header that fixes the
layout, a chip's two rows, a process row. Each function reads the cells of one line
and raises ParseError naming it; the walk over the lines lives in ``table``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.parsers import ParseError
from engine.parsers._common import to_int, to_opt_float, to_opt_int
from engine.parsers.npu_smi_info.model import HEALTH_STATES, NpuChip, NpuProcess

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
