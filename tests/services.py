"""pytest plugin (``-p tests.services``), imported before pytest-django loads the settings.

Gives the test session real services of its own: a bundled redis-server on a free
loopback port (unless REDIS_URL is set, as in CI's PostgreSQL/Redis run) and a
private var/ directory, so tests never touch the developer's console.

Under pytest-xdist (``make test`` runs ``-n``) every worker process loads this plugin,
so each gets its own var/ directory (its own SQLite test database and sim state) and
its own bundled redis-server. With REDIS_URL set, worker ``gwN`` takes the database N
after the one the URL names (redis://host:6379/9 -> 9, 10, ...), so the workers'
Celery queues, Channels groups and counters never meet; pytest-django gives each
worker a test database of its own on PostgreSQL (``test_<name>_gwN``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

_VAR = Path(tempfile.mkdtemp(prefix="console-test-var-"))
os.environ.setdefault("CONSOLE_VAR_DIR", str(_VAR))
os.environ.setdefault("SIM_STATE_DIR", str(_VAR / "sim"))
os.environ.pop("CONSOLE_MODE", None)
_redis: subprocess.Popen[bytes] | None = None


def worker_redis_url(url: str, worker: str) -> str:
    """``url`` with its database moved on by the xdist worker's number (gw0: as given)."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    index = int(worker.removeprefix("gw"))
    return urlunsplit(parts._replace(path=f"/{base + index}"))


if os.environ.get("REDIS_URL") and os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_URL"] = worker_redis_url(
        os.environ["REDIS_URL"], os.environ["PYTEST_XDIST_WORKER"]
    )
    # the broker and result store follow REDIS_URL (console.settings), per worker
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("CELERY_RESULT_BACKEND", None)
elif not os.environ.get("REDIS_URL"):
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
