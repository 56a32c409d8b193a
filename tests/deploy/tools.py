"""The deploy/ files' own tools (Debian packages, installed by `make deploy-tools`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

# tool → the Debian 12 package that ships it (apt-cache show / dpkg -S)
PACKAGES = {
    "nginx": "nginx",
    "promtool": "prometheus",
    "amtool": "prometheus-alertmanager",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "systemd-analyze": "systemd",
    "openssl": "openssl",
    "rabbitmqctl": "rabbitmq-server",
}


def need(tool: str) -> str:
    """The tool's path; fails (not skips) naming the package when it is missing."""
    found = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if not found:
        pytest.fail(
            f"{tool} is missing: `make deploy-tools` (as root) or "
            f"`sudo apt-get install {PACKAGES[tool]}`"
        )
    return found


def run(
    argv: list[str], timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run one tool (argv list), capturing text output."""
    return subprocess.run(  # noqa: S603 - argv list, no shell
        argv, capture_output=True, text=True, timeout=timeout, **kwargs
    )


def self_signed(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A throwaway self-signed certificate and key (openssl) for TLS configs."""
    cert, key = directory / "fullchain.pem", directory / "privkey.pem"
    result = run(
        [
            need("openssl"),
            "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-days", "2", "-subj", f"/CN={name}",
            "-addext", f"subjectAltName=DNS:{name},IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ]
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return cert, key
