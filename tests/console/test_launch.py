"""make run's launcher: honcho with web, workers, beat, the bundled Redis and one agent per sim node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_it_plans_every_process_for_the_demo(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "REDIS_URL",
            "CELERY_BROKER_URL",
            "CELERY_RESULT_BACKEND",
            "DATABASE_URL",
        }
    }
    env["CONSOLE_VAR_DIR"] = str(tmp_path)
    boot = subprocess.run(
        [sys.executable, "manage.py", "bootstrap_demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert boot.returncode == 0, boot.stderr
    assert "http://127.0.0.1:8000/" in boot.stdout and "admin" in boot.stdout
    result = subprocess.run(
        [sys.executable, "-m", "console.launch", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    command = result.stdout.strip().splitlines()[-1]
    assert " start redis web control beat " in command
    for n in range(1, 8):
        assert f"agent-ascend-0{n}" in command
        assert f"-Q node.ascend-0{n}" in result.stdout


def dry_run(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``python -m console.launch --dry-run --no-agents`` (no database needed) in a clean env."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "REDIS_URL",
            "CELERY_BROKER_URL",
            "CELERY_RESULT_BACKEND",
            "DATABASE_URL",
            "CONSOLE_MODE",
        }
    }
    env.update({"CONSOLE_VAR_DIR": str(tmp_path), **extra})
    return subprocess.run(
        [sys.executable, "-m", "console.launch", "--dry-run", "--no-agents"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_starts_the_bundled_redis_next_to_a_rabbitmq_broker(tmp_path: Path) -> None:
    # The broker moves to RabbitMQ; results and the Channels layer stay on the bundled Redis.
    result = dry_run(tmp_path, CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//")
    assert result.returncode == 0, result.stderr
    command = result.stdout.strip().splitlines()[-1]
    assert command.endswith(" start redis web control beat")
    assert "redis: python -m console.embedded_redis" in result.stdout


def test_it_leaves_redis_to_an_external_redis_url(tmp_path: Path) -> None:
    result = dry_run(
        tmp_path,
        CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].endswith(" start web control beat")
