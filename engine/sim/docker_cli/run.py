"""``docker run`` for the fake ``docker``: a container that is the sim engine.

A started "container" is ``python -m engine.sim.vllm serve`` with the container's
environment only, under ``engine/drivers/_runner.py`` so its exit code is kept. The
longest subcommand, so it has its own module: ``cmd_run`` reads as its steps (refuse
what docker would refuse, build the environment and the inspect record, start the
process, then detach or wait).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.sim import BIN_DIR
from engine.sim.docker_cli.errors import CliError
from engine.sim.docker_cli.grammar import parse_run, run_help
from engine.sim.docker_cli.store import _dir, _find, _remove, images
from engine.sim.state import write_json

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "engine" / "drivers" / "_runner.py"
SIM_BIN = BIN_DIR


def cmd_run(args: list[str]) -> int:
    """``docker run``: print the id (``--detach``) or wait and print the log; returns the exit status."""
    if args[:1] in (["--help"], ["-h"]):
        sys.stdout.write(run_help())
        return 0
    opts, image, command = parse_run(args)
    name = (opts.get("name") or [""])[-1]
    _refuse_unrunnable(image, name, command)
    env = _container_env(opts)
    # the agent's interpreter (SIM_PYTHON): the one with the sim engine's dependencies
    python = os.environ.get("SIM_PYTHON") or sys.executable
    cid = hashlib.sha256(f"{name}{time.time_ns()}".encode()).hexdigest()
    record = _record(cid, name, image, command, env, opts)
    proc = _start(cid, python, command, env)
    record["State"]["Pid"] = proc.pid
    write_json(_dir() / f"{cid}.json", record)
    if opts.get("detach") == ["true"]:
        print(cid)
        return 0
    return _attach(proc, record)


def _refuse_unrunnable(image: str, name: str, command: list[str]) -> None:
    """Raise docker's error for an absent image or a taken name, and the sim's for a non-vLLM command."""
    if image not in images():
        raise CliError(
            f"Unable to find image '{image}' locally\n"
            f"docker: Error response from daemon: pull access denied for {image} (sim: no registry)"
        )
    if name and _find(name):
        raise CliError(
            f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use.'
        )
    if (
        len(command) < 2
        or os.path.basename(command[0]) != "vllm"
        or command[1] != "serve"
    ):
        raise CliError(
            f"sim image runs only 'vllm serve …', got {command[:2]!r}", code=127
        )


def _container_env(opts: dict[str, list[str]]) -> dict[str, str]:
    """``-e K=V`` as given; a bare ``-e K`` passes the caller's value when it has one."""
    env: dict[str, str] = {}
    for item in opts.get("env", []):
        k, eq, v = item.partition("=")
        if eq:
            env[k] = v
        elif k in os.environ:
            env[k] = os.environ[k]
    return env


def _record(
    cid: str,
    name: str,
    image: str,
    command: list[str],
    env: dict[str, str],
    opts: dict[str, list[str]],
) -> dict[str, Any]:
    """The container's ``docker inspect`` record (its Pid is set once it started)."""
    devices = [
        {
            "PathOnHost": d.split(":")[0],
            "PathInContainer": d.split(":")[-1],
            "CgroupPermissions": "rwm",
        }
        for d in opts.get("device", [])
    ]
    return {
        "Id": cid,
        "Name": f"/{name or cid[:12]}",
        "Image": image,
        "Config": {
            "Image": image,
            "Labels": dict(x.partition("=")[::2] for x in opts.get("label", [])),
            "Env": [f"{k}={v}" for k, v in env.items()],
            "Cmd": command,
        },
        "HostConfig": {
            "NetworkMode": (opts.get("network") or ["bridge"])[-1],
            "Devices": devices,
            "Binds": opts.get("volume", []),
            "ShmSize": (opts.get("shm-size") or ["64m"])[-1],
            "RestartPolicy": {
                "Name": (opts.get("restart") or ["no"])[-1].split(":")[0]
            },
            "AutoRemove": opts.get("rm") == ["true"],
        },
        "State": {
            "Status": "running",
            "Pid": 0,
            "StartedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }


def _start(
    cid: str, python: str, command: list[str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``vllm serve``'s arguments on the sim engine, in a new session, logging to ``<id>.log``."""
    log = _dir() / f"{cid}.log"
    child_env = {
        **env,
        "PATH": os.pathsep.join([str(SIM_BIN), "/usr/bin", "/bin"]),
        "PYTHONPATH": str(REPO),
        "SIM_NODE": os.environ.get("SIM_NODE") or os.environ.get("NODE_NAME", ""),
        "SIM_STATE_DIR": os.environ.get("SIM_STATE_DIR", ""),
        "SIM_PYTHON": python,
        "HOSTNAME": cid[:12],
    }
    argv = [
        python,
        str(RUNNER),
        str(_dir() / f"{cid}.exit"),
        "--",
        python,
        "-m",
        "engine.sim.vllm",
        "serve",
        *command[2:],
    ]
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )


def _attach(proc: subprocess.Popen[bytes], record: dict[str, Any]) -> int:
    """Wait for the container, print its log, remove it under ``--rm``; docker's exit status."""
    code = proc.wait()
    log = _dir() / f"{record['Id']}.log"
    sys.stdout.write(log.read_text(encoding="utf-8", errors="replace"))
    if record["HostConfig"]["AutoRemove"]:
        _remove(record)
    return code if code >= 0 else 128 - code
