"""Settings come from the environment; production mode refuses to start half-configured."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fresh import fresh_python

PROBE = (
    "import json, django; from django.conf import settings; django.setup(); "
    "print(json.dumps({'engine': settings.DATABASES['default']['ENGINE'], 'name': str(settings.DATABASES['default']['NAME']), "
    "'redis': settings.REDIS_URL, 'broker': settings.CELERY_BROKER_URL, 'backend': settings.CELERY_RESULT_BACKEND, 'embedded': settings.EMBEDDED_REDIS, "
    "'debug': settings.DEBUG, 'tz': settings.TIME_ZONE, 'layer': settings.CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]['address'], "
    "'serializer': settings.CELERY_TASK_SERIALIZER, 'accept': settings.CELERY_ACCEPT_CONTENT}))"
)


def run_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "DATABASE_URL",
            "REDIS_URL",
            "CELERY_BROKER_URL",
            "CELERY_RESULT_BACKEND",
            "SECRET_KEY",
            "CONSOLE_DEV",
            "CONSOLE_MODE",
            "TIME_ZONE",
        }
    }
    clean.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "CONSOLE_VAR_DIR": str(tmp_path / "var"),
            **env,
        }
    )
    return fresh_python("-c", PROBE, env=clean, timeout=60)


def test_it_defaults_to_sqlite_and_embedded_redis(tmp_path: Path) -> None:
    result = run_settings(tmp_path)
    assert result.returncode == 0, result.stderr
    cfg = json.loads(result.stdout)
    assert cfg["engine"] == "django.db.backends.sqlite3"
    assert cfg["name"] == str(tmp_path / "var" / "console.sqlite3")
    assert cfg["embedded"] is True
    assert cfg["redis"] == "redis://127.0.0.1:16379/0" == cfg["broker"] == cfg["layer"]
    assert cfg["debug"] is False
    assert cfg["tz"] == "Asia/Shanghai"
    assert cfg["serializer"] == "json" and cfg["accept"] == ["json"]
    # The development SECRET_KEY is generated once and reused.
    key_file = tmp_path / "var" / "secret_key"
    first = key_file.read_text()
    assert run_settings(tmp_path).returncode == 0
    assert key_file.read_text() == first
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_it_reads_postgres_and_external_redis_from_env(tmp_path: Path) -> None:
    result = run_settings(
        tmp_path,
        DATABASE_URL="postgres://ops:pw@db.example:5432/console",
        REDIS_URL="redis://cache.example:6379/3",
        CONSOLE_DEV="1",
    )
    assert result.returncode == 0, result.stderr
    cfg = json.loads(result.stdout)
    assert cfg["engine"] == "django.db.backends.postgresql"
    assert cfg["name"] == "console"
    assert (
        cfg["redis"] == cfg["broker"] == cfg["layer"] == "redis://cache.example:6379/3"
    )
    assert cfg["embedded"] is False
    assert cfg["debug"] is True


def test_it_takes_a_rabbitmq_broker_with_results_and_channels_on_bundled_redis(
    tmp_path: Path,
) -> None:
    result = run_settings(
        tmp_path, CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//"
    )
    assert result.returncode == 0, result.stderr
    cfg = json.loads(result.stdout)
    assert cfg["broker"] == "amqp://guest:guest@127.0.0.1:5672//"
    # Results and WebSockets still need Redis: the bundled one, which make run must start.
    assert cfg["embedded"] is True
    assert cfg["redis"] == cfg["backend"] == cfg["layer"] == "redis://127.0.0.1:16379/0"


def test_it_takes_a_rabbitmq_broker_next_to_an_external_redis(tmp_path: Path) -> None:
    result = run_settings(
        tmp_path,
        CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//",
        REDIS_URL="redis://cache.example:6379/3",
    )
    assert result.returncode == 0, result.stderr
    cfg = json.loads(result.stdout)
    assert cfg["broker"].startswith("amqp://")
    assert cfg["embedded"] is False
    assert (
        cfg["redis"] == cfg["backend"] == cfg["layer"] == "redis://cache.example:6379/3"
    )


def test_it_refuses_production_with_a_rabbitmq_broker_but_no_redis_url(
    tmp_path: Path,
) -> None:
    result = run_settings(
        tmp_path,
        CONSOLE_MODE="production",
        SECRET_KEY="x" * 50,
        DATABASE_URL="postgres://x@h/db",
        CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//",
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "REDIS_URL is required when CONSOLE_MODE=production" in result.stderr
    assert "WebSockets" in result.stderr and "RabbitMQ" in result.stderr


def test_it_accepts_production_with_a_rabbitmq_broker_and_redis_url(
    tmp_path: Path,
) -> None:
    result = run_settings(
        tmp_path,
        CONSOLE_MODE="production",
        SECRET_KEY="x" * 50,
        DATABASE_URL="postgres://x@h/db",
        CELERY_BROKER_URL="amqp://console:pw@mq.example:5672//",
        REDIS_URL="redis://cache.example:6379/0",
    )
    assert result.returncode == 0, result.stderr
    cfg = json.loads(result.stdout)
    assert cfg["broker"] == "amqp://console:pw@mq.example:5672//"
    assert cfg["embedded"] is False
    assert cfg["backend"] == cfg["layer"] == "redis://cache.example:6379/0"


def test_it_refuses_production_without_secret_key(tmp_path: Path) -> None:
    result = run_settings(
        tmp_path,
        CONSOLE_MODE="production",
        DATABASE_URL="postgres://x@h/db",
        REDIS_URL="redis://h:6379/0",
    )
    assert result.returncode != 0
    assert "SECRET_KEY is required when CONSOLE_MODE=production" in result.stderr


def test_it_refuses_production_without_database_url(tmp_path: Path) -> None:
    result = run_settings(
        tmp_path,
        CONSOLE_MODE="production",
        SECRET_KEY="x" * 50,
        REDIS_URL="redis://h:6379/0",
    )
    assert result.returncode != 0
    assert "DATABASE_URL is required" in result.stderr


def test_it_names_a_bad_boolean(tmp_path: Path) -> None:
    result = run_settings(tmp_path, CONSOLE_DEV="maybe")
    assert result.returncode != 0
    assert "CONSOLE_DEV='maybe' is not a boolean" in result.stderr


def test_it_refuses_an_engine_key_that_cannot_go_into_a_header(tmp_path: Path) -> None:
    result = run_settings(tmp_path, ENGINE_API_KEY="key\twith-a-tab")
    assert result.returncode != 0
    assert "ENGINE_API_KEY must be printable ASCII" in result.stderr
    assert run_settings(tmp_path, ENGINE_API_KEY="a" * 64).returncode == 0


def test_it_reads_secret_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("file-secret-value\n")
    probe = "import django; from django.conf import settings; django.setup(); print(settings.SECRET_KEY)"
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(
        {
            "SECRET_KEY_FILE": str(secret),
            "CONSOLE_VAR_DIR": str(tmp_path / "v"),
            "DJANGO_SETTINGS_MODULE": "console.settings",
        }
    )
    result = fresh_python("-c", probe, env=env, timeout=60)
    assert result.stdout.strip() == "file-secret-value"
