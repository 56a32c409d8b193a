"""What npu-smi says of the cards: ``-t board`` and ``-t health`` (one block each), the
``-l`` list of NPUs and the ``-m`` chip mapping table."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from engine.parsers import ParseError
from engine.parsers._common import (
    NOT_AVAILABLE,
    check_npu_smi_unsupported,
    is_elision,
    numbered,
    require_text,
)
from engine.parsers.npu_smi_kv.reader import _blocks, _int, _single_block, _str


@dataclass(frozen=True)
class BoardInfo:
    """``npu-smi info -t board -i N [-c C]``; chip_* fields only with ``-c``."""

    npu_id: int
    chip_id: int | None
    product_name: str | None
    serial_number: str | None
    software_version: str | None  # = driver version
    firmware_version: str | None
    bus_info: str | None
    vendor_id: str | None
    device_id: str | None
    chip_count: int | None
    chip_type: str | None
    chip_name: str | None
    chip_version: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_board(text: str) -> BoardInfo:
    """Parse ``npu-smi info -t board``. Raises ParseError without ``NPU ID``."""
    b = _single_block(text)
    npu_id = _int(b, "NPU ID", text)
    if npu_id is None:
        raise ParseError("board output has no 'NPU ID'", raw=text, line=b.first_line)
    return BoardInfo(
        npu_id=npu_id,
        chip_id=_int(b, "Chip ID", text),
        product_name=_str(b, "Product Name"),
        serial_number=_str(b, "Serial Number"),
        software_version=_str(b, "Software Version"),
        firmware_version=_str(b, "Firmware Version"),
        bus_info=_str(b, "PCIe Bus Info"),
        vendor_id=_str(b, "PCI Vendor ID"),
        device_id=_str(b, "PCI Device ID"),
        chip_count=_int(b, "Chip Count", text),
        chip_type=_str(b, "Chip Type"),
        chip_name=_str(b, "Chip Name"),
        chip_version=_str(b, "Chip Version"),
    )


@dataclass(frozen=True)
class HealthInfo:
    """``npu-smi info -t health -i N [-c C]``; codes are hex events ("80E01801")."""

    health: str
    error_codes: list[str]
    error_information: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_HEALTH_STATES = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")
_ERROR_CODE = re.compile(r"^(0x)?[0-9A-Fa-f]+$")


def parse_health(text: str) -> HealthInfo:
    """Parse ``-t health``. Raises ParseError on a missing or unknown health state."""
    b = _single_block(text)
    key = next((k for k in ("Health Status", "Health") if k in b.values), None)
    if key is None:
        raise ParseError(
            "health output has no 'Health' key", raw=text, line=b.first_line
        )
    health = b.values[key]
    if health not in _HEALTH_STATES:
        raise ParseError(
            f"unknown health state {health!r}", raw=text, line=b.lines[key]
        )
    codes: list[str] = []
    raw_codes = b.values.get("Error Code", "NA")
    if raw_codes not in NOT_AVAILABLE:
        codes = [c for c in re.split(r"[\s,]+", raw_codes) if c]
        for code in codes:
            if not _ERROR_CODE.match(code):
                raise ParseError(
                    f"bad error code {code!r}", raw=text, line=b.lines["Error Code"]
                )
    return HealthInfo(
        health=health, error_codes=codes, error_information=_str(b, "Error Information")
    )


@dataclass(frozen=True)
class NpuListEntry:
    """One ``NPU ID`` / ``Chip Count`` pair of ``npu-smi info -l``."""

    npu_id: int
    chip_count: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_list(text: str) -> list[NpuListEntry]:
    """Parse ``npu-smi info -l``; checks ``Total Count`` against the entries."""
    blocks = _blocks(text)
    total: int | None = None
    entries: list[NpuListEntry] = []
    for b in blocks:
        if "Total Count" in b.values:
            total = _int(b, "Total Count", text)
            continue
        npu_id, count = _int(b, "NPU ID", text), _int(b, "Chip Count", text)
        if npu_id is None or count is None:
            raise ParseError(
                "expected 'NPU ID' and 'Chip Count'", raw=text, line=b.first_line
            )
        entries.append(NpuListEntry(npu_id=npu_id, chip_count=count))
    if total is None or total != len(entries):
        raise ParseError(
            f"'Total Count' {total} does not match {len(entries)} entries",
            raw=text,
            line=1,
        )
    return entries


@dataclass(frozen=True)
class ChipMapping:
    """One compute row of ``npu-smi info -m`` (MCU rows, without logic id, dropped)."""

    npu_id: int
    chip_id: int
    logic_id: int
    name: str
    phy_id: int | None = None  # A3 "Chip Phy-ID" column

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_mapping(text: str) -> list[ChipMapping]:
    """Parse ``npu-smi info -m`` (910B and the A3 variant with ``Chip Phy-ID``)."""
    require_text(text, "npu-smi info -m")
    check_npu_smi_unsupported(text)
    has_phy: bool | None = None
    result: list[ChipMapping] = []
    for lineno, line in numbered(text):
        s = line.strip()
        if not s or is_elision(s):
            continue
        if s.startswith("NPU ID"):
            has_phy = "Chip Phy-ID" in s
            continue
        if has_phy is None:
            raise ParseError(
                "row before the 'NPU ID  Chip ID ...' header", raw=text, line=lineno
            )
        id_count = 4 if has_phy else 3
        parts = s.split(None, id_count)
        if (
            len(parts) != id_count + 1
            or not parts[0].isdigit()
            or not parts[1].isdigit()
        ):
            raise ParseError("unrecognized npu-smi -m row", raw=text, line=lineno)
        logic = parts[2]
        if logic == "-":  # MCU row
            continue
        if not logic.isdigit() or (has_phy and not parts[3].isdigit()):
            raise ParseError("unrecognized npu-smi -m row", raw=text, line=lineno)
        result.append(
            ChipMapping(
                npu_id=int(parts[0]),
                chip_id=int(parts[1]),
                logic_id=int(logic),
                phy_id=int(parts[3]) if has_phy else None,
                name=parts[id_count].strip(),
            )
        )
    if not result:
        raise ParseError("no chip rows in npu-smi -m output", raw=text)
    return result
