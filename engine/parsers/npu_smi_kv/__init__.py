"""Parse npu-smi ``key : value`` output (``-t usages|temp|power|memory|board|health|
common|ecc``, ``-l``) and the ``-m`` mapping table.

npu-smi prints ``"\\t%-30s : %s\\n"``: a TAB, the key padded to 30 characters, then
`` : ``. Docs render the TAB as spaces (and ``-t health`` with one space); all are
accepted. A blank line ends a block. In ``-t usages|temp|power`` the ``Chip ID``
line comes *after* the values it labels, so it belongs to the block above it.

``reader`` splits the output into blocks and reads typed values; ``chips`` parses the
per-chip readings (``-t usages|temp|power|memory``); ``cards`` what npu-smi says of
the cards (``-t board|health``, ``-l``, ``-m``).
"""

from engine.parsers.npu_smi_kv.cards import (
    BoardInfo,
    ChipMapping,
    HealthInfo,
    NpuListEntry,
    parse_board,
    parse_health,
    parse_list,
    parse_mapping,
)
from engine.parsers.npu_smi_kv.chips import (
    ChipMemory,
    ChipPower,
    ChipTemp,
    ChipUsage,
    parse_memory,
    parse_power,
    parse_temp,
    parse_usages,
)
from engine.parsers.npu_smi_kv.reader import parse_kv

__all__ = [
    "BoardInfo",
    "ChipMapping",
    "ChipMemory",
    "ChipPower",
    "ChipTemp",
    "ChipUsage",
    "HealthInfo",
    "NpuListEntry",
    "parse_board",
    "parse_health",
    "parse_kv",
    "parse_list",
    "parse_mapping",
    "parse_memory",
    "parse_power",
    "parse_temp",
    "parse_usages",
]
