"""The fake ``docker``'s state on the sim node: containers and images.

A container is ``<id>.json`` (its inspect record), ``<id>.log`` and, once it ended,
``<id>.exit`` under ``$SIM_STATE_DIR/<node>/containers/``; images are those of the
node's vllm-ascend version unless ``images.json`` says otherwise. Every subcommand
reads it, so it stands apart from them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.sim.state import load_config, node_dir, read_json

VERSION_LABEL = "org.opencontainers.image.version"


def _dir() -> Path:
    d = node_dir() / "containers"
    d.mkdir(parents=True, exist_ok=True)
    return d


def images() -> dict[str, dict[str, str]]:
    """Images present on this sim node: those of its vllm-ascend version (A2 and A3),
    unless ``images.json`` in the node's state says otherwise."""
    saved = read_json(node_dir() / "images.json")
    if saved:
        return dict(saved)
    version = load_config(node_dir()).versions.get("vllm_ascend", "")
    repo = "quay.io/ascend/vllm-ascend"
    return {
        f"{repo}:v{version}{suffix}": {VERSION_LABEL: f"v{version}"}
        for suffix in ("", "-a3")
    }


def _find(ref: str) -> dict[str, Any] | None:
    for f in _dir().glob("*.json"):
        c = read_json(f)
        if c and (c["Name"] == f"/{ref}" or c["Id"].startswith(ref)):
            return c
    return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (started detached by us and not reaped) is not running
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _state(c: dict[str, Any]) -> dict[str, Any]:
    exit_file = _dir() / f"{c['Id']}.exit"
    ended = read_json(exit_file) if exit_file.exists() else None
    running = ended is None and _alive(c["State"]["Pid"])
    code = (ended or {}).get("exit_code", 0 if running else 137)
    return {
        **c["State"],
        "Status": "running" if running else "exited",
        "Running": running,
        "ExitCode": 0 if running else (code if code >= 0 else 128 - code),
        "Pid": c["State"]["Pid"] if running else 0,
    }


def _remove(c: dict[str, Any]) -> None:
    for suffix in (".json", ".exit", ".log"):
        (_dir() / f"{c['Id']}{suffix}").unlink(missing_ok=True)
