"""The intra-server link an engine's HCCL traffic takes: the one spelling of link modes.

HCCS is the chip-to-chip fabric inside an Atlas server; RoCE the NPUs' own Ethernet
ports. Console stores a node's mode with these values and engine/plans/argv.py turns each
into HCCL environment variables (reference/ascend-facts.md §4).
"""

from __future__ import annotations

from enum import StrEnum


class LinkMode(StrEnum):
    HCCS = "hccs"
    ROCE = "roce"


LINK_MODES = tuple(mode.value for mode in LinkMode)
