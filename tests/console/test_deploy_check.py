"""`manage.py check --deploy` is clean in production mode with the documented environment
(deploy/console.env.example), and production defaults to secure cookies, HSTS and HTTPS."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def documented_env(tmp_path: Path) -> dict[str, str]:
    """deploy/console.env.example with its /etc and /var/lib paths moved under tmp_path."""
    etc, var = tmp_path / "etc", tmp_path / "var"
    etc.mkdir()
    (etc / "secret_key").write_text(secrets.token_urlsafe(50))
    (etc / "metrics_token").write_text(secrets.token_urlsafe(32))
    env: dict[str, str] = {}
    for line in (ROOT / "deploy" / "console.env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, value = line.split("=", 1)
            value = value.replace("/etc/ascend-console", str(etc))
            env[name.strip()] = value.replace("/var/lib/ascend-console", str(var))
    return env


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "console.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_environment(tmp_path: Path) -> None:
    result = check_deploy(documented_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


@pytest.mark.parametrize("drop", ["SESSION_COOKIE_SECURE"])
def test_production_is_secure_without_being_told(tmp_path: Path, drop: str) -> None:
    env = documented_env(tmp_path)
    env.pop(drop)
    result = check_deploy(env)
    assert result.returncode == 0, result.stdout + result.stderr
    probe = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps([settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, "
        "settings.SECURE_HSTS_SECONDS, settings.SECURE_SSL_REDIRECT, "
        "settings.SECURE_PROXY_SSL_HEADER]))"
    )
    base = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "console.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert (
        out.strip()
        == '[true, true, 31536000, true, ["HTTP_X_FORWARDED_PROTO", "https"]]'
    )


def test_an_unset_production_environment_warns(tmp_path: Path) -> None:
    """The check is live: without HSTS it does warn (so the clean run above means something)."""
    env = {**documented_env(tmp_path), "SECURE_HSTS_SECONDS": "0"}
    result = check_deploy(env)
    assert result.returncode != 0 and "security.W004" in result.stdout + result.stderr
