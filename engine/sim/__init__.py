"""The simulator: npu-smi, hccn_tool and vLLM stand-ins that print the real formats.

The engine reaches it only through its driver, ``engine.drivers.sim`` (the registry
entry for nodes whose driver is "sim").
"""

from __future__ import annotations

from pathlib import Path

# The sim's executables (npu-smi, hccn_tool): the one definition of where they live.
BIN_DIR = Path(__file__).resolve().parent / "bin"
