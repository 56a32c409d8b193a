"""Render deploy/ files into a temporary root, as an installer would on a site."""

from __future__ import annotations

import re
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path

from tests.deploy.tools import DEPLOY, self_signed

NGINX_MAIN = """\
# The distribution's nginx.conf reduced to what deploy/nginx needs (http context).
daemon off;
# workers as root only here: the static files live under pytest's 0700 temp directory
user root;
pid {root}/nginx.pid;
error_log {root}/error.log;
worker_processes 1;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    access_log {root}/access.log;
    client_body_temp_path {root}/tmp/body;
    proxy_temp_path {root}/tmp/proxy;
    fastcgi_temp_path {root}/tmp/fastcgi;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;
    include {root}/sites/ascend-console.conf;
}}
"""


def render_nginx(
    root: Path,
    *,
    upstream: str = "127.0.0.1:8000",
    https_port: int = 443,
    http_port: int = 80,
    static_root: str = "/var/lib/ascend-console/static/",
    server_name: str = "console.example.gov.cn",
) -> Path:
    """deploy/nginx/ascend-console.conf under ``root`` with a self-signed certificate; returns nginx.conf."""
    (root / "sites").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    cert, key = self_signed(root, "localhost")
    site = (DEPLOY / "nginx" / "ascend-console.conf").read_text()
    for old, new in (
        ("/etc/ssl/ascend-console/fullchain.pem", str(cert)),
        ("/etc/ssl/ascend-console/privkey.pem", str(key)),
        ("/var/lib/ascend-console/static/", static_root),
        ("server 127.0.0.1:8000;", f"server {upstream};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("console.example.gov.cn", server_name),
    ):
        assert old in site, old  # the shipped file still has what we render
        site = site.replace(old, new)
    (root / "sites" / "ascend-console.conf").write_text(site)
    main = root / "nginx.conf"
    main.write_text(NGINX_MAIN.format(root=root))
    return main


@dataclass(frozen=True)
class UnitCommand:
    """What systemd would run for a [Service]: argv, working directory, environment."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]


def read_env_file(path: Path) -> dict[str, str]:
    """systemd EnvironmentFile: KEY=VALUE lines, # comments."""
    lines = path.read_text().splitlines()
    return dict(
        line.split("=", 1)
        for line in lines
        if "=" in line and not line.lstrip().startswith("#")
    )


def render_unit(unit: str, root: Path, *, venv: Path, app: Path) -> UnitCommand:
    """deploy/systemd/<unit> with its paths under ``root`` (the venv and app given), its
    Environment= / EnvironmentFile= applied and ${VAR} / %H expanded as systemd does."""
    text = (DEPLOY / "systemd" / unit).read_text()
    for old, new in (
        ("/opt/ascend-console/venv", str(venv)),
        ("/opt/ascend-console/app", str(app)),
        ("/etc/ascend-console", str(root / "etc")),
    ):
        text = text.replace(old, new)
    (root / "units").mkdir(parents=True, exist_ok=True)
    (root / "units" / unit).write_text(text)
    env: dict[str, str] = {}
    cwd, exec_start = app, ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "Environment":
            name, _, val = value.partition("=")
            env[name] = val
        elif key == "EnvironmentFile":
            env.update(read_env_file(Path(value.lstrip("-"))))
        elif key == "WorkingDirectory":
            cwd = Path(value)
        elif key == "ExecStart":
            exec_start = value
    expanded = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], exec_start)
    expanded = expanded.replace("%H", socket.gethostname())
    return UnitCommand(argv=shlex.split(expanded), cwd=cwd, env=env)
