"""Shared set-up for the monitoring benchmarks: a private var/ dir, a bundled Redis, a migrated SQLite database.

Import this before Django: it sets the environment the settings read.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
VAR = Path(tempfile.mkdtemp(prefix="console-bench-"))
os.environ["CONSOLE_VAR_DIR"] = str(VAR)
os.environ.pop("CONSOLE_MODE", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ["DATABASE_URL"] = f"sqlite:///{VAR / 'bench.sqlite3'}"
os.environ["LOG_LEVEL"] = "WARNING"
_redis: subprocess.Popen[bytes] | None = None
if not os.environ.get("REDIS_URL"):
    from console.embedded_redis import free_port, start

    _port = free_port()
    _redis = start(_port, VAR / "redis")
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{_port}/0"


def _cleanup() -> None:
    if _redis is not None and _redis.poll() is None:
        _redis.terminate()
        _redis.wait(timeout=10)
    shutil.rmtree(VAR, ignore_errors=True)


atexit.register(_cleanup)

import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402

call_command("migrate", verbosity=0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
