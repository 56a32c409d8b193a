"""A fresh interpreter for what a test cannot see from inside its own process (what
a new process imports, loads or prints at startup)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh_python(
    *args: str, env: dict[str, str], timeout: float = 120, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` at the repository root with ``env`` only; output as text."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )
