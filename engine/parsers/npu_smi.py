"""Parse ``npu-smi`` output: the ``npu-smi info`` table, ``-t <type>`` key : value
lists, ``-t hccs`` link counters, ``-l`` and ``-m``.

The one module callers import. The table parser lives in npu_smi_info/ (layouts
described there), the key : value parsers in npu_smi_kv/ and the HCCS parser in
hccs.py; all are re-exported here.
"""

from __future__ import annotations

from engine.parsers.hccs import HccsLink, HccsStatus, hccs_loss, parse_hccs
from engine.parsers.npu_smi_info import (
    HEALTH_STATES,
    NpuChip,
    NpuProcess,
    NpuSmiInfo,
    parse_info,
)
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
