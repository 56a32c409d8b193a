"""Parse the ``npu-smi info`` table.

The table layouts handled (ascend-facts.md §1.2–§1.3, samples in tests/data/ascend):
98-column 910B (drivers 23.0–25.3), 116-column wide 26.0 (extra "Process id in
container" column), A3 (``Chip  Phy-ID``, two dies per NPU, second die's power
``-``), 310P (``Chip    Device``, no HBM column, power ``NA``). Copies from docs
may be indented and may elide rows with ``...``; both are tolerated, nothing is
guessed.

``model`` holds what the table says (chips, processes); ``table`` walks its lines;
``rows`` reads one chip or process row.
"""

from engine.parsers.npu_smi_info.model import (
    HEALTH_STATES,
    NpuChip,
    NpuProcess,
    NpuSmiInfo,
)
from engine.parsers.npu_smi_info.table import parse_info

__all__ = ["HEALTH_STATES", "NpuChip", "NpuProcess", "NpuSmiInfo", "parse_info"]
