"""The one seam through which the agent runs Ascend tools (``npu-smi``, ``hccn_tool``).

Production runs the real binaries with an argv list and a timeout. The node's driver
may answer instead (``Driver.run_tool``): on a sim node the simulator's tools print
the real output formats (engine.drivers.sim says when and why in-process).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from engine.drivers import node_driver

# dmidecode: only "-s system-product-name", the server model (engine/parsers/server_model.py)
TOOL_NAMES = ("npu-smi", "hccn_tool", "dmidecode")


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
    answered = node_driver().run_tool(argv)
    if answered is not None:
        return answered
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
    directories = node_driver().tool_dirs
    for directory in directories:
        candidate = Path(directory) / name
        if candidate.exists():
            return str(candidate)
    raise ToolError(
        f"{name} not found on PATH or in {', '.join(directories)}; install the Ascend driver package"
    )
