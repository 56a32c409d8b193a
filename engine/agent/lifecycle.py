"""The engine's lifecycle tasks (engine.start/stop/status/logs) and what they report:
ranks joined from the head's log, the /health probe, the plan saved on the node."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from celery.signals import worker_shutdown

from engine.agent.boundary import (
    _check_node,
    _driver,
    _spec,
    agent_task,
    config,
    validate_plan,
)
from engine.diagnose import diagnose
from engine.drivers import get_driver
from engine.drivers.base import DriverError, EngineStatus
from engine.flags import argv_value

# What the head logs while its engines join (vLLM's wait_for_engine_startup in
# vllm/v1/engine/utils.py, DEBUG level, so only with VLLM_LOGGING_LEVEL=DEBUG): after
# every 10 s poll without news, the engines that have not said HELLO yet ("to connect")
# and those connected but not READY ("to start"), then one line per handshake message.
WAITING_RE = re.compile(
    r"Waiting for (\d+) local, (\d+) remote core engine proc\(s\) to (connect|start)\."
)
HANDSHAKE_RE = re.compile(
    r"\b(HELLO|READY) from (local|remote) core engine process (\d+)\."
)
# uvicorn's line once the API server serves: every engine has joined and is ready
STARTUP_COMPLETE = "Application startup complete."
# the first line of every `vllm serve` run; a log may still hold earlier runs
RUN_START = "vLLM API server version"


def _argv_int(argv: list[str], flag: str, default: int) -> int:
    value = argv_value(argv, flag)
    try:
        return default if value is None else int(value)
    except ValueError:
        return default


def ranks_joined(argv: list[str], lines: list[str]) -> int | None:
    """How many ranks have joined the head, from the head's own log; None when headless.

    DP across nodes counts DP ranks: ``--data-parallel-size`` less the remote engines
    the latest "Waiting for … to connect." line still awaits (HELLO lines refine it).
    TP/PP across nodes (``--nnodes``) counts node ranks, which vLLM does not log one by
    one. Without DEBUG lines only the head's own ranks count until "Application startup
    complete.", after which every rank has joined. Only the latest run of the log counts.
    """
    if "--headless" in argv:
        return None
    nnodes = _argv_int(argv, "--nnodes", 1)
    dp_size = max(_argv_int(argv, "--data-parallel-size", 1), 1)
    if nnodes > 1:
        total, own = nnodes, 1
    else:
        total = dp_size
        own = min(_argv_int(argv, "--data-parallel-size-local", dp_size), dp_size)
    started = False
    awaited: int | None = None  # remote engines not connected, per the latest poll
    previous = ""  # the kind of the previous "Waiting for" line, "" after news
    hello: set[int] = set()
    for line in lines:
        if RUN_START in line:
            started, awaited, previous, hello = False, None, "", set()
        elif STARTUP_COMPLETE in line:
            started = True
        elif nnodes > 1:
            continue  # these lines count the head's DP engines, not nodes
        elif m := WAITING_RE.search(line):
            kind = m.group(3)
            if kind == "connect":
                awaited = int(m.group(2))
            elif previous != "connect":
                awaited = 0  # a poll with nothing left to connect logs only "start"
            previous = kind
        elif m := HANDSHAKE_RE.search(line):
            if m.group(1) == "HELLO" and m.group(2) == "remote":
                hello.add(int(m.group(3)))
            previous = ""
    if started:
        return total
    joined = own + len(hello)
    if awaited is not None:
        joined = max(joined, total - awaited)
    return min(joined, total)


def _probe_health(argv: list[str]) -> int | None:
    """GET /health on this node's API server (head only); None when it does not answer."""
    if "--headless" in argv:
        return None
    host = argv_value(argv, "--host") or "127.0.0.1"
    port = argv_value(argv, "--port") or "8000"
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as resp:  # noqa: S310 (loopback/LAN engine)
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


def _status_dict(status: EngineStatus, argv: list[str]) -> dict[str, Any]:
    data = status.to_dict()
    data["node"] = config.node_name
    data["driver"] = config.driver
    data["health"] = _probe_health(argv) if status.state == "running" and argv else None
    lines = get_driver(config.driver).logs(_spec(argv=argv), lines=2000) if argv else []
    data["ranks_joined"] = ranks_joined(argv, lines)
    if status.state == "exited":
        data["diagnoses"] = [d.to_dict() for d in diagnose(status.log_tail)]
    data["agent_time"] = time.time()
    return data


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the agent's user only (0600, also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _saved_argv() -> list[str]:
    path = config.workdir / "plan.json"
    try:
        return [str(a) for a in json.loads(path.read_text()).get("argv", [])]
    except (OSError, ValueError):
        return []


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_engine_with_agent(**_: Any) -> None:
    """A sim node's engine lives and dies with its agent (make run's Ctrl-C leaves no orphan).

    Real nodes keep serving through an agent restart: systemd owns their engine.
    """
    if (
        _driver().engine_dies_with_agent
        or os.environ.get("AGENT_STOP_ENGINE_ON_EXIT") == "1"
    ):
        try:
            get_driver(config.driver).stop(_spec(argv=_saved_argv()), grace_s=5.0)
        except DriverError:
            pass


@agent_task("engine.start")
def engine_start(node: str, plan: dict[str, Any]) -> dict[str, Any]:
    """Start this node's share of a plan; returns the status with the agent-side start time."""
    _check_node(node)
    argv, env = validate_plan(plan)
    spec = _spec(
        rank=int(plan.get("rank", 0)),
        role=str(plan.get("role", "head")),
        argv=argv,
        env=env,
    )
    started_at = time.time()
    try:
        status = get_driver(config.driver).start(spec)
    except DriverError as exc:
        tail = str(exc).splitlines()
        return {
            "node": config.node_name,
            "ok": False,
            "error": str(exc),
            "permanent": exc.permanent,
            "diagnoses": [d.to_dict() for d in diagnose(tail)],
            "started_at": started_at,
        }
    # 0600: the env may hold tokens (HF_TOKEN) and the engine's API key
    _write_private(
        config.workdir / "plan.json",
        json.dumps({"argv": argv, "env": env, "rank": spec.rank, "role": spec.role}),
    )
    return {**_status_dict(status, argv), "ok": True, "started_at": started_at}


@agent_task("engine.stop")
def engine_stop(node: str, grace_s: float = 30.0) -> dict[str, Any]:
    """Stop the engine's whole process tree (idempotent); returns the final status."""
    _check_node(node)
    argv = _saved_argv()
    status = get_driver(config.driver).stop(_spec(argv=argv), grace_s=float(grace_s))
    return {**_status_dict(status, []), "stopped_at": time.time()}


@agent_task("engine.status")
def engine_status(node: str) -> dict[str, Any]:
    """Process state, pid, uptime, RSS, /health (head), ranks joined, last log lines, diagnosis."""
    _check_node(node)
    argv = _saved_argv()
    status = get_driver(config.driver).status(_spec(argv=argv))
    return _status_dict(status, argv)


@agent_task("engine.logs")
def engine_logs(node: str, lines: int = 200) -> dict[str, Any]:
    """The last ``lines`` lines of the engine log (max 5000) and their diagnosis."""
    _check_node(node)
    tail = get_driver(config.driver).logs(
        _spec(argv=_saved_argv()), lines=max(1, min(int(lines), 5000))
    )
    return {
        "node": config.node_name,
        "lines": tail,
        "diagnoses": [d.to_dict() for d in diagnose(tail)],
    }
