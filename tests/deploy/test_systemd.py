"""deploy/systemd passes `systemd-analyze verify` in a temporary root holding the paths the
units expect (the venv's executables, the environment files, the distribution's units)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.deploy.tools import DEPLOY, need, run

UNITS = sorted((DEPLOY / "systemd").glob("*.service"))


def make_root(root: Path) -> Path:
    """A filesystem root as the install script leaves it; returns its unit directory."""
    venv = root / "opt/ascend-console/venv/bin"
    venv.mkdir(parents=True)
    for exe in ("celery", "python"):
        (venv / exe).write_text("#!/bin/sh\n")
        (venv / exe).chmod(0o755)
    (root / "opt/ascend-console/app").mkdir(parents=True)
    etc = root / "etc/ascend-console"
    etc.mkdir(parents=True)
    for env in ("console.env", "agent.env"):
        (etc / env).write_text("")
    # sysinit.target, network-online.target, …: the units' dependencies resolve in the root
    shutil.copytree(
        "/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True
    )
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    return units


def test_it_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    units = make_root(tmp_path)
    for unit in UNITS:
        shutil.copy(unit, units)
    argv = [need("systemd-analyze"), "verify", f"--root={tmp_path}", "--man=no"]
    result = run(argv + [str(units / u.name) for u in UNITS])
    # verify exits 0 on unknown keys too: any output is a finding
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_it_finds_what_verify_would_refuse(tmp_path: Path) -> None:
    units = make_root(tmp_path)
    (tmp_path / "opt/ascend-console/venv/bin/python").unlink()
    shutil.copy(DEPLOY / "systemd/ascend-console-web.service", units)
    argv = [need("systemd-analyze"), "verify", f"--root={tmp_path}", "--man=no"]
    result = run(argv + [str(units / "ascend-console-web.service")])
    assert result.returncode != 0 and "python is not executable" in result.stderr


def test_it_runs_the_web_unit_with_web_concurrency_workers() -> None:
    web = (DEPLOY / "systemd/ascend-console-web.service").read_text()
    assert (
        "--workers ${WEB_CONCURRENCY}" in web and "Environment=WEB_CONCURRENCY=" in web
    )
