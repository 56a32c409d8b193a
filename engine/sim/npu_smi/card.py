"""Per-card ``npu-smi info -t <type> -i N [-c 0]`` renderers: usages, temp, power, memory, board, health, common.

Each takes the node, the card and the chip (``None`` for the card-level form, which
adds the card head and the MCU rows) and returns the lines; :data:`SUPPORTED_TYPES`
is the table the command line looks a type up in. The HCCS types have their own
options (``-lane``, ``-time``) and live in :mod:`engine.sim.npu_smi.hccs`.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.sim import hardware
from engine.sim.npu_smi.node import Node, kv

AICORE_COUNT = {"910B1": 24, "910B2": 24, "910B3": 20, "910B4": 20}


def _card_head(npu: int) -> list[str]:
    return [kv("NPU ID", npu), kv("Chip Count", 1), ""]


def _pct(used: int, total: int) -> int:
    return int(round(100.0 * used / total)) if total else 0


def t_usages(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    body = [
        kv("DDR Capacity(MB)", 0),
        kv("DDR Usage Rate(%)", 0),
        kv("DDR Hugepages Total(page)", 0),
        kv("DDR Hugepages Usage Rate(%)", 0),
        kv("HBM Capacity(MB)", c.hbm_total_mb),
        kv("HBM Usage Rate(%)", _pct(c.hbm_used_mb, c.hbm_total_mb)),
        kv("Aicore Usage Rate(%)", c.aicore_pct),
        kv("Aivector Usage Rate(%)", c.aicore_pct // 2),
        kv("Aicpu Usage Rate(%)", 0),
        kv("Ctrlcpu Usage Rate(%)", 6),
        kv("DDR Bandwidth Usage Rate(%)", 0),
        kv("HBM Bandwidth Usage Rate(%)", c.aicore_pct // 3),
        kv("NPU Utilization(%)", c.aicore_pct),
        kv("Aicube Usage Rate(%)", c.aicore_pct),
    ]
    return (body if chip is not None else _card_head(npu) + body) + [kv("Chip ID", 0)]


def t_temp(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    if chip is not None:
        return [kv("NPU Temperature (C)", c.temp_c), kv("Chip ID", 0)]
    mcu = 36 + c.temp_c // 20
    return _card_head(npu) + [
        kv("NPU Temperature (C)", c.temp_c),
        kv("Chip ID", 0),
        "",
        kv("LM75A_TE (C)", mcu),
        kv("LM75B_TE (C)", mcu),
        kv("Chip Name", "MCU"),
    ]


def t_power(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    line = kv("NPU Real-time Power(W)", f"{c.power_w:.1f}")
    return ([line] if chip is not None else _card_head(npu) + [line]) + [
        kv("Chip ID", 0)
    ]


def t_memory(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    body = [
        kv("DDR Capacity(MB)", 0),
        kv("DDR Clock Speed(MHz)", 0),
        kv("HBM Capacity(MB)", c.hbm_total_mb),
        kv("HBM Clock Speed(MHz)", 1600),
        kv("HBM Temperature(C)", c.hbm_temp_c),
        kv("HBM Manufacturer ID", "0x57"),
    ]
    return body if chip is not None else _card_head(npu) + body + [kv("Chip ID", 0)]


def t_board(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    v = node.cfg.versions
    if chip is not None:
        return [
            kv("NPU ID", npu),
            kv("Chip ID", 0),
            kv("Chip Type", "Ascend"),
            kv("Chip Name", node.cfg.npu_name),
            kv("Chip Version", "V1"),
            kv("Board ID", "0x60"),
            kv("PCB ID", "NA"),
            kv("BOM ID", 1),
            kv("Chip Position ID", 0),
            kv("PCIe Bus Info", c.bus_id),
            kv("Firmware Version", v["firmware"]),
        ]
    return [
        kv("NPU ID", npu),
        kv("Product Name", "IT21HMDC_Bin5"),
        kv("Model", "NA"),
        kv("Manufacturer", "Huawei"),
        kv("Serial Number", f"1025C90{npu:05d}"),
        kv("Software Version", v["driver"]),
        kv("Firmware Version", v["firmware"]),
        kv("Compatibility", "OK"),
        kv("Board ID", "0x60"),
        kv("PCB ID", "A"),
        kv("BOM ID", 1),
        kv("PCIe Bus Info", c.bus_id),
        kv("Slot ID", npu),
        kv("Class ID", "NA"),
        kv("PCI Vendor ID", "0x19E5"),
        kv("PCI Device ID", "0xD802"),
        kv("Subsystem Vendor ID", "0x19E5"),
        kv("Subsystem Device ID", "0x3003"),
        kv("Chip Count", 1),
    ]


def t_health(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    if c.error_codes:
        # "\t%-30s :" then " %04X" per code (print_error_codes)
        codes = f"\t{'Error Code':<30} :" + "".join(
            f" {code}" for code in c.error_codes
        )
        info = f"\t{'Error Information':<30} : {hardware.WARNING_INFO}"
    else:
        codes, info = kv("Error Code", "NA"), kv("Error Information", "NA")
    # card level prints "Health", chip level "Health Status" (npu_chip_info.c / npu_info_print_ext.c)
    return [
        kv("Health Status" if chip is not None else "Health", c.health),
        codes,
        info,
    ]


def t_common(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    body = [
        kv("Memory Usage Rate(%)", 0),
        kv("HBM Usage Rate(%)", _pct(c.hbm_used_mb, c.hbm_total_mb)),
        kv("Aicore Usage Rate(%)", c.aicore_pct),
        kv("Aicore Freq(MHZ)", 1800),
        kv("Aicore curFreq(MHZ)", 1800 if c.aicore_pct else 800),
        kv("Aicore Count", AICORE_COUNT.get(node.cfg.npu_name, 20)),
        kv("Temperature(C)", c.temp_c),
        kv("NPU Real-time Power(W)", f"{c.power_w:.1f}"),
    ]
    if chip is not None:
        return [kv("Chip ID", 0)] + body
    return (
        [kv("NPU ID", npu), kv("Chip Count", 1), "", kv("Chip ID", 0)]
        + body
        + [
            "",
            kv("Chip Name", "mcu"),
            kv("Temperature(C)", 36 + c.temp_c // 20),
        ]
    )


TypeFn = Callable[[Node, int, "int | None"], list[str]]
SUPPORTED_TYPES: dict[str, TypeFn] = {
    "usages": t_usages,
    "temp": t_temp,
    "power": t_power,
    "memory": t_memory,
    "board": t_board,
    "health": t_health,
    "common": t_common,
}
