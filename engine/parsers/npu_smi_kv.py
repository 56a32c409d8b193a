"""Parse npu-smi ``key : value`` output (``-t usages|temp|power|memory|board|health|
common|ecc``, ``-l``) and the ``-m`` mapping table.

npu-smi prints ``"\\t%-30s : %s\\n"``: a TAB, the key padded to 30 characters, then
`` : ``. Docs render the TAB as spaces (and ``-t health`` with one space); all are
accepted. A blank line ends a block. In ``-t usages|temp|power`` the ``Chip ID``
line comes *after* the values it labels, so it belongs to the block above it.
"""

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
    to_int,
    to_opt_float,
    to_opt_int,
)


@dataclass
class _Block:
    values: dict[str, str]
    lines: dict[str, int]
    first_line: int


def _blocks(text: str) -> list[_Block]:
    require_text(text, "npu-smi")
    check_npu_smi_unsupported(text)
    blocks: list[_Block] = []
    current: _Block | None = None
    for lineno, line in numbered(text):
        s = line.strip()
        if not s:
            current = None
            continue
        if is_elision(s):
            continue
        key, sep, value = s.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ParseError("expected 'key : value'", raw=text, line=lineno)
        if current is None:
            current = _Block(values={}, lines={}, first_line=lineno)
            blocks.append(current)
        if key in current.values:
            raise ParseError(
                f"duplicate key {key!r} in one block", raw=text, line=lineno
            )
        current.values[key] = value
        current.lines[key] = lineno
    if not blocks:
        raise ParseError("no 'key : value' lines in npu-smi output", raw=text)
    return blocks


def parse_kv(text: str) -> list[dict[str, str]]:
    """Blocks of ``key : value`` pairs, in output order; keys and values stripped."""
    return [dict(b.values) for b in _blocks(text)]


# -- typed helpers ---------------------------------------------------------------


def _int(block: _Block, key: str, raw: str) -> int | None:
    if key not in block.values:
        return None
    return to_opt_int(block.values[key], what=key, raw=raw, line=block.lines[key])


def _float(block: _Block, key: str, raw: str) -> float | None:
    if key not in block.values:
        return None
    return to_opt_float(block.values[key], what=key, raw=raw, line=block.lines[key])


def _str(block: _Block, key: str) -> str | None:
    value = block.values.get(key)
    if value is None or value in NOT_AVAILABLE:
        return None
    return value


def _card_and_chips(text: str) -> tuple[int | None, list[_Block], list[_Block]]:
    """Split ``-t usages|temp|power|common`` output into (npu id, chip blocks, others).

    The card block carries ``NPU ID`` / ``Chip Count``; each chip block carries
    ``Chip ID``; anything else (the MCU sensor block) is returned as "others".
    """
    blocks = _blocks(text)
    npu_id: int | None = None
    chip_count: int | None = None
    chips: list[_Block] = []
    others: list[_Block] = []
    for b in blocks:
        if "NPU ID" in b.values:
            npu_id = _int(b, "NPU ID", text)
            chip_count = _int(b, "Chip Count", text)
        if "Chip ID" in b.values:
            _int(b, "Chip ID", text)  # validates the id
            chips.append(b)
        elif "NPU ID" not in b.values:
            others.append(b)
    if not chips:
        raise ParseError(
            "no 'Chip ID' block in npu-smi output", raw=text, line=blocks[0].first_line
        )
    if chip_count is not None and chip_count != len(chips):
        raise ParseError(
            f"'Chip Count' says {chip_count} but {len(chips)} chip block(s) follow",
            raw=text,
            line=blocks[0].first_line,
        )
    return npu_id, chips, others


def _chip_id(b: _Block, raw: str) -> int:
    return to_int(b.values["Chip ID"], what="Chip ID", raw=raw, line=b.lines["Chip ID"])


@dataclass(frozen=True)
class ChipUsage:
    """``npu-smi info -t usages -i N``, one per chip; None = key not printed."""

    npu_id: int | None
    chip_id: int
    hbm_capacity_mb: int | None
    hbm_usage_pct: float | None
    aicore_pct: float | None
    aivector_pct: float | None
    aicpu_pct: float | None
    ctrlcpu_pct: float | None
    ddr_capacity_mb: int | None
    ddr_usage_pct: float | None
    ddr_hugepages_total: int | None
    ddr_hugepages_usage_pct: float | None
    ddr_bandwidth_pct: float | None
    hbm_bandwidth_pct: float | None
    npu_util_pct: float | None  # 25.x+ on 910B/A3
    aicube_pct: float | None  # 25.x+ on 910B/A3
    vectorcore_pct: float | None  # 310P

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_usages(text: str) -> list[ChipUsage]:
    """Parse ``npu-smi info -t usages -i N``; one ChipUsage per ``Chip ID`` block."""
    npu_id, chips, _ = _card_and_chips(text)
    return [
        ChipUsage(
            npu_id=npu_id,
            chip_id=_chip_id(b, text),
            hbm_capacity_mb=_int(b, "HBM Capacity(MB)", text),
            hbm_usage_pct=_float(b, "HBM Usage Rate(%)", text),
            aicore_pct=_float(b, "Aicore Usage Rate(%)", text),
            aivector_pct=_float(b, "Aivector Usage Rate(%)", text),
            aicpu_pct=_float(b, "Aicpu Usage Rate(%)", text),
            ctrlcpu_pct=_float(b, "Ctrlcpu Usage Rate(%)", text),
            ddr_capacity_mb=_int(b, "DDR Capacity(MB)", text),
            ddr_usage_pct=_float(b, "DDR Usage Rate(%)", text),
            ddr_hugepages_total=_int(b, "DDR Hugepages Total(page)", text),
            ddr_hugepages_usage_pct=_float(b, "DDR Hugepages Usage Rate(%)", text),
            ddr_bandwidth_pct=_float(b, "DDR Bandwidth Usage Rate(%)", text),
            hbm_bandwidth_pct=_float(b, "HBM Bandwidth Usage Rate(%)", text),
            npu_util_pct=_float(b, "NPU Utilization(%)", text),
            aicube_pct=_float(b, "Aicube Usage Rate(%)", text),
            vectorcore_pct=_float(b, "Vectorcore Usage Rate(%)", text),
        )
        for b in chips
    ]


@dataclass(frozen=True)
class ChipTemp:
    """``npu-smi info -t temp -i N``: chip temperature; MCU sensors in ``sensors``."""

    npu_id: int | None
    chip_id: int
    temp_c: float | None
    sensors: dict[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_TEMP_KEYS = ("NPU Temperature (C)", "Temperature (C)", "Temperature(C)")


def parse_temp(text: str) -> list[ChipTemp]:
    """Parse ``npu-smi info -t temp -i N``; ParseError if a chip has no temperature."""
    npu_id, chips, others = _card_and_chips(text)
    sensors: dict[str, float | None] = {}
    for b in others:
        for key in b.values:
            if key.endswith("(C)"):  # LM75A_TE (C), ...; "Chip Name : MCU" is a label
                sensors[key] = _float(b, key, text)
    result = []
    for b in chips:
        temp_key = next((k for k in _TEMP_KEYS if k in b.values), None)
        if temp_key is None:
            raise ParseError(
                "chip block has no temperature key", raw=text, line=b.first_line
            )
        result.append(
            ChipTemp(
                npu_id=npu_id,
                chip_id=_chip_id(b, text),
                temp_c=_float(b, temp_key, text),
                sensors=sensors,
            )
        )
    return result


@dataclass(frozen=True)
class ChipPower:
    """``npu-smi info -t power -i N``."""

    npu_id: int | None
    chip_id: int
    power_w: float | None
    rated_power_w: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_power(text: str) -> list[ChipPower]:
    """Parse ``npu-smi info -t power -i N``; ``power_w`` is the real-time draw."""
    npu_id, chips, _ = _card_and_chips(text)
    result = []
    for b in chips:
        key = next(
            (
                k
                for k in ("NPU Real-time Power(W)", "Power Dissipation(W)")
                if k in b.values
            ),
            None,
        )
        if key is None:
            raise ParseError("chip block has no power key", raw=text, line=b.first_line)
        result.append(
            ChipPower(
                npu_id=npu_id,
                chip_id=_chip_id(b, text),
                power_w=_float(b, key, text),
                rated_power_w=_float(b, "Rated Power Dissipation(W)", text),
            )
        )
    return result


@dataclass(frozen=True)
class ChipMemory:
    """``npu-smi info -t memory -i N -c C``."""

    ddr_capacity_mb: int | None
    ddr_clock_mhz: int | None
    hbm_capacity_mb: int | None
    hbm_clock_mhz: int | None
    hbm_temp_c: float | None
    hbm_manufacturer_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_memory(text: str) -> ChipMemory:
    """Parse ``npu-smi info -t memory -i N -c C`` (one block)."""
    b = _single_block(text)
    if "HBM Capacity(MB)" not in b.values and "DDR Capacity(MB)" not in b.values:
        raise ParseError(
            "no memory capacity key in npu-smi output", raw=text, line=b.first_line
        )
    return ChipMemory(
        ddr_capacity_mb=_int(b, "DDR Capacity(MB)", text),
        ddr_clock_mhz=_int(b, "DDR Clock Speed(MHz)", text),
        hbm_capacity_mb=_int(b, "HBM Capacity(MB)", text),
        hbm_clock_mhz=_int(b, "HBM Clock Speed(MHz)", text),
        hbm_temp_c=_float(b, "HBM Temperature(C)", text),
        hbm_manufacturer_id=_str(b, "HBM Manufacturer ID"),
    )


def _single_block(text: str) -> _Block:
    blocks = _blocks(text)
    if len(blocks) != 1:
        raise ParseError(
            f"expected one block, found {len(blocks)}",
            raw=text,
            line=blocks[1].first_line,
        )
    return blocks[0]


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
