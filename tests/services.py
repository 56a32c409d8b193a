"""pytest plugin (``-p tests.services``), imported before pytest-django loads the settings.

Gives the test session real services of its own: a bundled redis-server on a free
loopback port (unless REDIS_URL is set, as in CI's PostgreSQL/Redis run) and a
private var/ directory, so tests never touch the developer's console.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_VAR = Path(tempfile.mkdtemp(prefix="console-test-var-"))
os.environ.setdefault("CONSOLE_VAR_DIR", str(_VAR))
os.environ.setdefault("SIM_STATE_DIR", str(_VAR / "sim"))
os.environ.pop("CONSOLE_MODE", None)
_redis: subprocess.Popen[bytes] | None = None

if not os.environ.get("REDIS_URL"):
    from console.embedded_redis import free_port, start

    _port = free_port()
    _redis = start(_port, _VAR / "redis")
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{_port}/0"
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("CELERY_RESULT_BACKEND", None)


def _cleanup() -> None:
    if _redis is not None and _redis.poll() is None:
        _redis.terminate()
        try:
            _redis.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _redis.kill()
    shutil.rmtree(_VAR, ignore_errors=True)


atexit.register(_cleanup)
