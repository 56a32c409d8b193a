"""`make run` seeds before its Redis starts: the seed says nothing alarming about it
(no gateway cache bump, no socket to tell of the new users: neither can exist yet)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.factories import free_port
from tests.fresh import fresh_python


def test_the_demo_seed_logs_no_error_while_redis_is_not_up(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")
    }
    env.update(CONSOLE_VAR_DIR=str(tmp_path), CONSOLE_REDIS_PORT=str(free_port()))
    out = fresh_python("manage.py", "bootstrap_demo", env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    logged = out.stdout + out.stderr
    assert "Demo logins" in logged
    for word in ("ERROR", "WARNING", "Traceback"):
        assert word not in logged, logged[-3000:]
