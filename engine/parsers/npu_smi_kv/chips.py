"""Per-chip readings: ``npu-smi info -t usages|temp|power -i N`` (one result per chip
block) and ``-t memory -i N -c C``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.parsers import ParseError
from engine.parsers.npu_smi_kv.reader import (
    _card_and_chips,
    _chip_id,
    _float,
    _int,
    _single_block,
    _str,
)


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
