"""The one seam through which the agent runs Ascend tools (``npu-smi``, ``hccn_tool``).

Production runs the real binaries with an argv list and a timeout. On a sim node
the same argv goes to the simulator's tool (engine/sim), which prints the real
output formats. By default the sim tools are called in-process: each fake tool is
a Python program costing ~100 ms to start, and a poll round makes dozens of calls
per node, which would drown a 2-core demo machine. ``SIM_TOOLS_EXEC=1`` runs the
sim executables as real subprocesses instead (the test suite does this once).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# dmidecode: only "-s system-product-name", the server model (engine/parsers/server_model.py)
TOOL_NAMES = ("npu-smi", "hccn_tool", "dmidecode")
# Real installs put hccn_tool here rather than on PATH (ascend-facts.md §3).
TOOL_FALLBACK_DIRS = (
    "/usr/local/Ascend/driver/tools",
    "/usr/local/bin",
    "/usr/bin",
    "/usr/sbin",
)
SIM_BIN = Path(__file__).resolve().parent / "sim" / "bin"


@dataclass
class ToolResult:
    """What a tool printed and how it ended."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class ToolError(Exception):
    """The tool could not be run at all (missing binary, timeout)."""


def _run(argv: list[str], timeout: float) -> ToolResult:
    """Run one tool; the one place to mock. Never a shell, never a command string."""
    if argv[0] not in TOOL_NAMES:
        raise ToolError(
            f"{argv[0]!r} is not an allowlisted tool ({', '.join(TOOL_NAMES)})"
        )
    if (
        os.environ.get("ENGINE_DRIVER") == "sim"
        and os.environ.get("SIM_TOOLS_EXEC") != "1"
    ):
        return _run_sim_in_process(argv)
    exe = _resolve(argv[0])
    try:
        proc = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(
            f"{' '.join(argv)} did not finish within {timeout:.0f}s"
        ) from None
    except OSError as exc:
        raise ToolError(f"{argv[0]} cannot run: {exc.strerror}") from None
    return ToolResult(
        argv=argv, returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr
    )


def run_tool(argv: list[str], timeout: float = 10.0) -> ToolResult:
    """Public entry: run an allowlisted Ascend tool with a timeout."""
    return _run(argv, timeout)


def _resolve(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("ENGINE_DRIVER") == "sim":
        return str(SIM_BIN / name)
    for directory in TOOL_FALLBACK_DIRS:
        candidate = Path(directory) / name
        if candidate.exists():
            return str(candidate)
    raise ToolError(
        f"{name} not found on PATH or in {', '.join(TOOL_FALLBACK_DIRS)}; install the Ascend driver package"
    )


def _run_sim_in_process(argv: list[str]) -> ToolResult:
    from engine.sim import dmidecode, hccn_tool, npu_smi
    from engine.sim.state import node_dir

    d = node_dir()
    if argv[0] == "dmidecode":
        code, out, err = dmidecode.run(argv[1:], d)
        return ToolResult(argv=argv, returncode=code, stdout=out, stderr=err)
    if argv[0] == "npu-smi":
        code, out = npu_smi.run(argv[1:], d)
        return ToolResult(argv=argv, returncode=code, stdout=out, stderr="")
    code, out, err = hccn_tool.run(argv[1:], d)
    return ToolResult(argv=argv, returncode=code, stdout=out, stderr=err)
