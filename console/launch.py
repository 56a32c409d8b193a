"""Start the console's processes under honcho (what ``make run`` does after bootstrap).

Writes ``var/Procfile`` = the repository's Procfile + one node agent per simulated
node in the inventory, then execs ``honcho start`` with the processes this mode
needs (the bundled Redis whenever REDIS_URL is unset, even with a RabbitMQ
CELERY_BROKER_URL: results and the Channels layer still use Redis).
Honcho supervises them and stops all of them on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.conf import LazySettings

BASE_DIR = Path(__file__).resolve().parent.parent


def agent_line(node: str, driver: str, npu_ips: list[str]) -> str:
    """Procfile line for one node agent (a Celery worker on queue node.<name>, no Django)."""
    ips = shlex.quote(",".join(npu_ips))
    return (
        f"agent-{node}: env NODE_NAME={shlex.quote(node)} ENGINE_DRIVER={shlex.quote(driver)} SIM_NPU_IPS={ips} "
        f"celery -A engine.agent worker -Q node.{node} -n agent.{node}@%h --pool threads --concurrency 4 --loglevel INFO"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.conf import settings

    env = _child_env(settings)
    lines, names = _processes(settings, agents=not args.no_agents)
    procfile = Path(settings.VAR_DIR) / "Procfile"
    procfile.write_text("\n".join(lines) + "\n")
    honcho = shutil.which("honcho", path=str(Path(sys.executable).parent)) or "honcho"
    cmd = [honcho, "-f", str(procfile), "-d", str(BASE_DIR), "start", *names]
    if args.dry_run:
        print(procfile.read_text())
        print(shlex.join(cmd))
        return 0
    os.environ.update(env)
    # Put the venv first on PATH so honcho's children find python and celery from it.
    os.environ["PATH"] = (
        f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    os.execv(cmd[0], cmd)
    return 0  # not reached


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m console.launch", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--no-agents",
        action="store_true",
        help="do not start node agents for simulated nodes",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the Procfile and the honcho command, start nothing",
    )
    return parser.parse_args(argv)


def _child_env(settings: LazySettings) -> dict[str, str]:
    """The environment honcho's processes get on top of the console's own."""
    return {
        "CONSOLE_HOST": settings.CONSOLE_HOST,
        "CONSOLE_PORT": str(settings.CONSOLE_PORT),
        "CONSOLE_VAR_DIR": str(settings.VAR_DIR),
        "CONSOLE_REDIS_PORT": str(settings.EMBEDDED_REDIS_PORT),
        # Agents import no Django, so they get the broker URL explicitly.
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_RESULT_BACKEND": settings.CELERY_RESULT_BACKEND,
        "SIM_STATE_DIR": os.environ.get(
            "SIM_STATE_DIR", str(Path(settings.VAR_DIR) / "sim")
        ),
        "PYTHONUNBUFFERED": "1",
    }


def _processes(settings: LazySettings, *, agents: bool) -> tuple[list[str], list[str]]:
    """(the Procfile's lines, the process names honcho starts): the repository's
    Procfile, plus one agent per simulated node unless ``agents`` is False."""
    # After django.setup(): models need configured settings and a ready app registry.
    from console.models import Node

    lines = (BASE_DIR / "Procfile").read_text().splitlines()
    names = ["web", "control", "beat"]
    if settings.EMBEDDED_REDIS:  # REDIS_URL unset, whatever the broker
        names.insert(0, "redis")
    if agents:
        for node in Node.objects.filter(driver=Node.Driver.SIM).order_by("name"):
            lines.append(agent_line(node.name, node.driver, list(node.npu_ips or [])))
            names.append(f"agent-{node.name}")
    return lines, names


if __name__ == "__main__":
    raise SystemExit(main())
