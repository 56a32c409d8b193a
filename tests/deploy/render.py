"""Render deploy/ files into a temporary root, as an installer would on a site."""

from __future__ import annotations

from pathlib import Path

from tests.deploy.tools import DEPLOY, self_signed

NGINX_MAIN = """\
# The distribution's nginx.conf reduced to what deploy/nginx needs (http context).
daemon off;
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
