"""Production smoke: the console in production mode on PostgreSQL with RabbitMQ as the
Celery broker, the web unit's several uvicorn workers behind nginx with a self-signed
certificate, every process started from the deploy/ files rendered into a temporary root
(the units' ExecStart, Environment and EnvironmentFile as systemd would apply them). A
browser logs in through nginx, the dashboard's WebSocket connects through it, a
two-node sim cluster starts from the cluster page, and the gateway answers through it.

Uses the machine's PostgreSQL (a database of its own), RabbitMQ (a vhost and user of its
own, made with rabbitmqctl) and Redis db 4 (channel layer and Celery results).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.agents import reap_sim_engines
from tests.deploy.render import UnitCommand, render_nginx, render_unit
from tests.deploy.tools import ROOT, need, run
from tests.e2e.test_dashboard import CHROMIUM_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
VENV = ROOT / ".venv"
PASSWORD = "Prod-Smoke-Pass-42"
SEED = """
import json
from django.contrib.auth import get_user_model
from console.gateway.services import apikey_create
from console.permissions import set_user_role
from tests.factories import make_cluster, make_profile
user = get_user_model().objects.create_user("opal", password={password!r})
set_user_role(user, "operator")
profile = make_profile(
    name="small MoE, DP2 x TP8", model_path="/data/models/small-moe", served_model_name="small",
    data_parallel_size=2, tensor_parallel_size=8, max_model_len=8192, max_num_seqs=8,
    total_params_b=30.0, active_params_b=3.0, num_layers=48, num_experts=128,
    hidden_size=2048, num_kv_heads=4, head_dim=128, kv_layers=48,
)
cluster = make_cluster("prod-smoke", nodes=2, profile=profile, free_ports=True)
nodes = {{n.name: n.npu_ips for n in cluster.ranked_nodes()}}
_key, secret = apikey_create(name="smoke", user=None, rpm=600, tpm=1_000_000)
print(json.dumps({{"cluster": cluster.pk, "nodes": nodes, "key": secret}}))
"""


STEPS = """
from console.models import Operation
for op in Operation.objects.all():
    print(op.pk, op.kind, op.state, op.error[:300])
    for s in op.steps.order_by("seq"):
        print("  ", s.seq, s.name, s.state, (s.summary or "")[:200])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def postgres() -> Iterator[str]:
    name = f"console_deploy_prod_{os.getpid()}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"postgres://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def rabbitmq() -> Iterator[str]:
    ctl = need("rabbitmqctl")
    vhost, user, password = (
        f"console-smoke-{os.getpid()}",
        f"smoke{os.getpid()}",
        secrets.token_hex(12),
    )
    for argv in (
        ["add_vhost", vhost],
        ["add_user", user, password],
        ["set_permissions", "-p", vhost, user, ".*", ".*", ".*"],
    ):
        result = run([ctl, *argv])
        assert result.returncode == 0, result.stderr
    yield f"amqp://{user}:{password}@127.0.0.1:5672/{vhost}"
    run([ctl, "delete_vhost", vhost])
    run([ctl, "delete_user", user])


def logged(path: Path, line: str, wait_s: float = 10.0) -> str:
    """The log at ``path`` once it holds ``line`` (or at the deadline). nginx writes a
    request's access line when it frees the request, after the last byte went out
    (src/http/ngx_http_request.c: ngx_http_free_request runs ngx_http_log_request,
    the NGX_HTTP_LOG_PHASE handlers), so a client that has its whole answer can read
    the log before the line is in it."""
    deadline = time.monotonic() + wait_s
    while True:
        text = path.read_text()
        if line in text or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def start(stack: ExitStack, cmd: UnitCommand, log: Path) -> subprocess.Popen[bytes]:
    """Run a rendered unit's command in its own process group until the stack closes."""
    env = {
        "PATH": f"{VENV}/bin:/usr/bin:/bin",
        "HOME": str(log.parent),
        "LANG": "C.UTF-8",
        **cmd.env,
    }
    out = log.open("wb")
    proc = subprocess.Popen(  # noqa: S603 - argv from the unit
        cmd.argv,
        cwd=cmd.cwd,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def stop() -> None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()

    stack.callback(stop)
    return proc


def manage(env: dict[str, str], *args: str) -> str:
    full = {
        "PATH": f"{VENV}/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        **env,
    }
    result = run(
        [str(VENV / "bin" / "python"), "manage.py", *args],
        cwd=ROOT,
        env=full,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_it_serves_production_behind_nginx(
    tmp_path: Path, postgres: str, rabbitmq: str
) -> None:
    from playwright.sync_api import sync_playwright

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "var").mkdir()
    web_port, https_port, http_port = free_port(), free_port(), free_port()
    base = f"https://127.0.0.1:{https_port}"
    (root / "etc" / "secret_key").write_text(secrets.token_urlsafe(50))
    (root / "etc" / "metrics_token").write_text(secrets.token_urlsafe(20))
    console_env = {
        "CONSOLE_MODE": "production",
        "SECRET_KEY_FILE": f"{root}/etc/secret_key",
        "DATABASE_URL": postgres,
        "REDIS_URL": "redis://127.0.0.1:6379/4",
        "CELERY_BROKER_URL": rabbitmq,
        "CELERY_RESULT_BACKEND": "redis://127.0.0.1:6379/4",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": base,
        "SESSION_COOKIE_SECURE": "true",
        "TRUST_X_FORWARDED_FOR": "true",
        "CONSOLE_HOST": "127.0.0.1",
        "CONSOLE_PORT": str(web_port),
        "WEB_CONCURRENCY": "3",
        "CONSOLE_VAR_DIR": f"{root}/var",
        "STATIC_ROOT": f"{root}/var/static",
        "METRICS_TOKEN_FILE": f"{root}/etc/metrics_token",
        "COLLECT_INTERVAL_S": "2",
        "WARMUP_REQUESTS": "12",
        "ENGINE_HEALTH_TIMEOUT_S": "60",
        "DRAIN_TIMEOUT_S": "5",
        "OPERATION_HEARTBEAT_S": "1",
    }
    (root / "etc" / "console.env").write_text(
        "".join(f"{k}={v}\n" for k, v in console_env.items())
    )
    manage(console_env, "migrate", "--noinput", "-v", "0")
    manage(console_env, "collectstatic", "--noinput", "-v", "0")
    seed = json.loads(
        manage(console_env, "shell", "-v", "0", "-c", SEED.format(password=PASSWORD))
    )
    sim_state = tmp_path / "sim"
    units = {
        name: render_unit(f"{name}.service", root, venv=VENV, app=ROOT)
        for name in (
            "ascend-console-web",
            "ascend-console-control",
            "ascend-console-beat",
        )
    }
    # one simulated Ascend server per node: its own /etc/ascend-console/agent.env and unit
    for node, npu_ips in seed["nodes"].items():
        host = tmp_path / node
        (host / "etc").mkdir(parents=True)
        agent_env = {
            "NODE_NAME": node,
            "CELERY_BROKER_URL": rabbitmq,
            "CELERY_RESULT_BACKEND": "redis://127.0.0.1:6379/4",
            "ENGINE_DRIVER": "sim",
            "SIM_STATE_DIR": str(sim_state),
            "SIM_NPU_IPS": ",".join(npu_ips),
            "SIM_TIME_SCALE": "0.05",
            "SIM_LOAD_S": "0.5",
        }
        (host / "etc" / "agent.env").write_text(
            "".join(f"{k}={v}\n" for k, v in agent_env.items())
        )
        units[f"agent-{node}"] = render_unit(
            "ascend-agent.service", host, venv=VENV, app=ROOT
        )
    web = units["ascend-console-web"]
    assert (
        web.argv[web.argv.index("--workers") + 1] == "3"
    )  # WEB_CONCURRENCY from console.env
    nginx_conf = render_nginx(
        root / "nginx",
        upstream=f"127.0.0.1:{web_port}",
        https_port=https_port,
        http_port=http_port,
        static_root=f"{root}/var/static/",
        server_name="localhost",
    )
    cert = root / "nginx" / "fullchain.pem"
    tls = ssl.create_default_context(
        cafile=str(cert)
    )  # trust the self-signed certificate only
    try:
        with ExitStack() as stack:
            for name, cmd in units.items():
                start(stack, cmd, tmp_path / f"{name}.log")
            start(
                stack,
                UnitCommand(
                    [
                        need("nginx"),
                        "-c",
                        str(nginx_conf),
                        "-e",
                        str(root / "nginx" / "error.log"),
                    ],
                    root,
                    {},
                ),
                tmp_path / "nginx.log",
            )

            def healthy() -> bool:
                try:
                    return (
                        httpx.get(f"{base}/healthz", verify=tls, timeout=3).status_code
                        == 200
                    )
                except httpx.HTTPError:
                    return False

            wait_for(healthy, 90, "the console never answered /healthz through nginx")
            # plain HTTP is redirected to HTTPS by the second server block
            redirect = httpx.get(f"http://127.0.0.1:{http_port}/accounts/login/")
            assert redirect.status_code == 301 and redirect.headers[
                "location"
            ].startswith("https://")

            pw = stack.enter_context(sync_playwright())
            browser = pw.chromium.launch(
                executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
            )
            stack.callback(browser.close)
            page = browser.new_page(locale="en-US", ignore_https_errors=True)
            page.on("dialog", lambda dialog: dialog.accept())
            page.goto(f"{base}/accounts/login/")
            page.fill("input[name=username]", "opal")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            cookies = {c["name"]: c for c in page.context.cookies()}
            assert (
                cookies["sessionid"]["secure"] is True
            )  # SESSION_COOKIE_SECURE behind TLS

            page.goto(f"{base}/monitoring/clusters/{seed['cluster']}/")
            page.wait_for_selector(
                "#conn-state.live", timeout=30_000
            )  # WebSocket via nginx /ws/

            page.goto(f"{base}/clusters/prod-smoke/")
            page.fill("#op-reason", "production smoke")
            page.click("button.op-start")
            page.wait_for_url(f"{base}/operations/*/", timeout=30_000)
            page.wait_for_selector("#op-conn.live", timeout=30_000)
            try:
                # the badge's colour, not its text: live labels come in the worker's language
                page.wait_for_selector("#op-state.badge-green", timeout=180_000)
            finally:  # the runbook's steps, for whoever reads a failure
                print(manage(console_env, "shell", "-v", "0", "-c", STEPS))
            page.reload()
            assert page.text_content("#op-state").strip() == "Succeeded"

            answer = httpx.post(
                f"{base}/v1/completions",
                headers={"Authorization": f"Bearer {seed['key']}"},
                json={"model": "small", "prompt": "Say hello", "max_tokens": 8},
                verify=tls,
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["text"]
            access = logged(root / "nginx" / "access.log", "POST /v1/completions")
            assert "POST /v1/completions" in access and "GET /ws/" in access
    finally:
        reap_sim_engines(sim_state)
