"""engine/ is what runs on an Ascend node: it must import without Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_imports_the_agent_without_django() -> None:
    code = "import sys, engine.agent; print('django' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_it_imports_every_engine_module_with_django_blocked() -> None:
    # a package by its own name (engine.agent), not as its __init__ module
    modules = sorted(
        ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for parts in (
            p.relative_to(ROOT).with_suffix("").parts
            for p in (ROOT / "engine").rglob("*.py")
            if p.name != "__main__.py"
        )
    )
    code = (
        "import importlib, sys; sys.modules['django'] = None\n"
        f"for m in {modules!r}:\n    importlib.import_module(m)\n"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert "engine.agent" in modules
