"""The node agent: a Celery worker on queue ``node.<name>`` with allowlisted tasks only.

Start it on an Ascend server with::

    NODE_NAME=ascend-01 ENGINE_DRIVER=systemd CELERY_BROKER_URL=redis://console:6379/0 \\
        celery -A engine.agent worker -Q node.ascend-01

It imports no Django and holds no database credentials. Every task maps to argv
built locally: ``engine.start`` accepts only a ``vllm serve`` command line whose
flags pass the target version's flag check and whose environment names are on an
allowlist; nothing received over the wire runs as a command string.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# kombu.utils.json imports django.utils when Django happens to be installed (pip
# install .[node] brings the console's dependencies along). The agent must never
# load Django: hide it while kombu's JSON module loads, then take the block away.
_blocked = "django" not in sys.modules
if _blocked:
    sys.modules["django"] = None  # type: ignore[assignment]
import kombu.utils.json  # noqa: E402,F401
import psutil  # noqa: E402
from celery import Celery, current_task  # noqa: E402
from celery.exceptions import Ignore  # noqa: E402
from celery.signals import worker_init, worker_shutdown  # noqa: E402

if _blocked:
    del sys.modules["django"]

from engine import bench_serve, weights  # noqa: E402
from engine.collect import collect  # noqa: E402
from engine.diagnose import diagnose  # noqa: E402
from engine.drivers import get_driver, node_driver  # noqa: E402
from engine.drivers.base import Driver, DriverError, EngineSpec, EngineStatus  # noqa: E402
from engine.evidence import check_request, gather  # noqa: E402
from engine.flags import argv_value, check_argv  # noqa: E402
from engine.messages import check_message, check_plan  # noqa: E402
from engine.preflight import check_server_model, run_preflight, versions  # noqa: E402

AGENT_VERSION = "0.2.0"
# Environment names a plan may set for vllm serve. Anything else (LD_PRELOAD, PATH,
# PYTHONPATH, …) could turn a plan into code execution, so it is refused.
ALLOWED_ENV_PREFIXES = (
    "HCCL_",
    "GLOO_",
    "TP_SOCKET_",
    "OMP_",
    "TASK_QUEUE_ENABLE",
    "PYTORCH_NPU_",
    "ASCEND_",
    "VLLM_",
    "HF_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "CPU_AFFINITY",
    "ACL_",
    "MS_",
    "INF_NAN_MODE",
)
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


@dataclass(frozen=True)
class AgentConfig:
    """The agent's settings, from the environment (Django settings do not exist on a node)."""

    node_name: str
    broker_url: str
    result_backend: str
    driver: str
    workdir: Path
    vllm_version: str

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> AgentConfig:
        env = dict(os.environ if environ is None else environ)
        node = (
            env.get("NODE_NAME") or env.get("CONSOLE_NODE_NAME") or socket.gethostname()
        )
        broker = (
            env.get("CELERY_BROKER_URL")
            or env.get("REDIS_URL")
            or "redis://127.0.0.1:16379/0"
        )
        backend = env.get("CELERY_RESULT_BACKEND") or env.get("REDIS_URL") or broker
        if backend.startswith("amqp"):
            backend = "rpc://"
        driver = env.get("ENGINE_DRIVER", "systemd")
        workdir = get_driver(driver).workdir(node, env)
        version = (
            env.get("SIM_VLLM_VERSION")
            or env.get("AGENT_VLLM_VERSION")
            or _installed_vllm()
            or "0.23.0"
        )
        return cls(
            node_name=node,
            broker_url=broker,
            result_backend=backend,
            driver=driver,
            workdir=workdir.resolve(),
            vllm_version=version,
        )


def _installed_vllm() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


config = AgentConfig.from_env()

# fixups=[]: never load Celery's Django fix-up, even if DJANGO_SETTINGS_MODULE leaks into the env.
# set_as_current=False: a control-side process that imports this module (tests, tools) must keep
# the console's app as Celery's current app, or its shared tasks would publish to node.<host>.
app = Celery(
    "engine.agent",
    broker=config.broker_url,
    backend=config.result_backend,
    fixups=[],
    set_as_current=False,
)
app.conf.update(
    accept_content=["json"],  # never unpickle what comes over the wire
    task_serializer="json",
    result_serializer="json",
    task_default_queue=f"node.{config.node_name}",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    result_expires=3600,
    task_time_limit=900,
    # No remote control: without it anyone on the broker could inspect().conf() the agent
    # or broadcast("shutdown") to stop it. The agent consumes node.<name> and nothing else.
    worker_enable_remote_control=False,
    # Redis: the agent's own unacked keys (kombu's defaults are one hash shared by every
    # consumer), so a Redis ACL can confine each agent to keys of its own node
    # (console/services/broker_acl.py); other transports ignore these options.
    broker_transport_options={
        "unacked_key": f"unacked:node.{config.node_name}",
        "unacked_index_key": f"unacked_index:node.{config.node_name}",
        "unacked_mutex_key": f"unacked_mutex:node.{config.node_name}",
    },
)


@functools.cache
def _driver() -> Driver:
    """This node's driver, its node prepared once: at worker start or on the first task,
    never at import (importing this module changes nothing in the process)."""
    driver = node_driver(config.driver)
    driver.prepare_node(config.node_name, config.workdir)
    return driver


@worker_init.connect  # type: ignore[untyped-decorator]
def _prepare_node(**_: Any) -> None:
    _driver()


# Every task this agent runs. Celery executes only registered tasks; this set is
# the reviewable allowlist, and a test checks the registry equals it.
ALLOWED_TASKS = frozenset(
    {
        "node.heartbeat",
        "node.echo",
        "node.collect",
        "node.preflight",
        "node.weights_sha256",
        "node.bench_serve",
        "node.bench_stop",
        "engine.start",
        "engine.stop",
        "engine.status",
        "engine.logs",
        "node.evidence",
        "sim.inject",
        "sim.clear",
        "sim.state",
    }
)


def agent_task(name: str) -> Callable[[Callable[..., Any]], Any]:
    """Register an allowlisted task. On a sim node with the ``agent-stop`` fault the task
    answers nothing (no result is stored), so the control side sees a dead agent."""

    def decorator(func: Callable[..., Any]) -> Any:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # every field of the message on its task's allowlist before anything runs
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise ValueError(f"{name}: {exc}") from None
            check_message(name, bound.arguments)
            if name not in {"sim.clear", "sim.state"} and not _driver().answers(
                config.node_name
            ):
                raise Ignore()
            return func(*args, **kwargs)

        return app.task(name=name, shared=False)(wrapper)

    return decorator


def _check_node(node: str) -> None:
    if node != config.node_name:
        raise ValueError(
            f"task for node {node!r} reached the agent of {config.node_name!r}; check the queue routing"
        )


def _spec(
    rank: int = 0,
    role: str = "head",
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> EngineSpec:
    config.workdir.mkdir(parents=True, exist_ok=True)
    return EngineSpec(
        node=config.node_name,
        rank=rank,
        role=role,
        argv=argv or [],
        env=env or {},
        workdir=str(config.workdir),
    )


def validate_plan(plan: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Refuse anything but a ``vllm serve`` argv with known flags and allowlisted env names."""
    check_plan(plan)  # keys, types, the role, no control characters
    argv = [str(a) for a in plan.get("argv") or []]
    env = {str(k): str(v) for k, v in dict(plan.get("env") or {}).items()}
    if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
        raise ValueError(
            f"plan argv must be 'vllm serve MODEL [flags]', got {argv[:3]!r}"
        )
    problems = check_argv(argv[2:], config.vllm_version)
    if problems:
        raise ValueError(
            f"plan flags rejected for vLLM {config.vllm_version}: "
            + "; ".join(p.message for p in problems)
        )
    bad = sorted(k for k in env if not k.startswith(ALLOWED_ENV_PREFIXES))
    if bad:
        raise ValueError(
            f"plan environment names not allowed on the agent: {', '.join(bad)}"
        )
    return argv, env


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
    import json

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


@agent_task("node.heartbeat")
def heartbeat(node: str) -> dict[str, Any]:
    """Who and where this agent is; the control side uses it for reachability."""
    return {
        "node": config.node_name,
        "asked_for": node,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "driver": config.driver,
        "agent_version": AGENT_VERSION,
        "vllm_version": config.vllm_version,
        "time": time.time(),
    }


@agent_task("node.echo")
def echo(node: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Return the payload unchanged (round-trip check of the JSON transport)."""
    return {"node": config.node_name, "payload": payload}


@agent_task("engine.start")
def engine_start(node: str, plan: dict[str, Any]) -> dict[str, Any]:
    """Start this node's share of a plan; returns the status with the agent-side start time."""
    import json

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


@agent_task("node.evidence")
def node_evidence(node: str, log_lines: int = 2000) -> dict[str, Any]:
    """A bounded evidence bundle (engine.evidence): engine log, newest plogs, npu-smi,
    link state, davinci/HCCS dmesg lines, versions. Reads allowlisted places only."""
    _check_node(node)
    lines = check_request(log_lines=log_lines)
    tail = get_driver(config.driver).logs(_spec(argv=_saved_argv()), lines=lines)
    home = _driver().home_dir(config.node_name)
    return gather(
        node=config.node_name,
        engine_log=tail,
        home=home,
        environ=os.environ,
        versions=versions(),
    )


@agent_task("node.collect")
def node_collect(
    node: str, model_path: str | None = None, detect_server_model: bool = False
) -> dict[str, Any]:
    """One telemetry sample: parsed npu-smi and hccn_tool, host CPU/memory/load/disk,
    engine RSS; with ``detect_server_model`` also the server model, detected as
    preflight does (asked once for a node whose model was never detected)."""
    _check_node(node)
    status = get_driver(config.driver).status(_spec(argv=_saved_argv()))
    sample = collect(
        node=config.node_name,
        model_path=model_path,
        engine_pids=[status.pid] if status.pid else [],
    )
    sample["engine"] = {
        "state": status.state,
        "pid": status.pid,
        "uptime_s": status.uptime_s,
    }
    if detect_server_model:
        sample["server_model"] = check_server_model()[1].to_dict()
    return sample


@agent_task("node.preflight")
def node_preflight(
    node: str,
    expected_npus: int,
    host_ip: str,
    ports: list[int],
    model_path: str,
    ping_targets: list[str],
    vllm_ascend_version: str = "",
) -> dict[str, Any]:
    """The node-side preflight checks (engine.preflight), each pass/warn/fail with evidence and a fix."""
    _check_node(node)
    result = run_preflight(
        expected_npus=int(expected_npus),
        host_ip=str(host_ip),
        ports=[int(p) for p in ports],
        model_path=str(model_path),
        ping_targets=[str(t) for t in ping_targets],
        vllm_ascend_version=str(vllm_ascend_version),
    )
    return {"node": config.node_name, "driver": config.driver, **result}


@agent_task("node.weights_sha256")
def node_weights_sha256(node: str, model_path: str) -> dict[str, Any]:
    """The model directory's manifest with a sha256 per file (engine/weights.py): cached
    by size and mtime, read at most ``WEIGHTS_HASH_MB_S`` MB/s. While it reads, the
    task's state is ``PROGRESS`` with weights.HashProgress's fields (file, done/total
    bytes, files_done/files), which the console shows; the answer carries the final
    ``progress`` (``cached`` files and ``bytes_read`` say what the cache saved)."""
    _check_node(node)
    local = _driver().model_dir(str(model_path), config.node_name)
    found = weights.manifest(local)
    cache = weights.HashCache(
        config.workdir / "weights-sha256.json",
        max_mb_s=float(os.environ.get("WEIGHTS_HASH_MB_S", "200")),
    )
    task = current_task

    def report(state: dict[str, Any]) -> None:
        if task is not None and task.request.id:
            task.update_state(state="PROGRESS", meta=state)

    if found["exists"]:
        found["sha256"], found["progress"] = weights.hash_manifest(local, cache, report)
    else:
        found["sha256"], found["progress"] = {}, {}
    found["path"] = str(model_path)
    return {"node": config.node_name, **found}


def _saved_plan() -> dict[str, Any]:
    import json

    try:
        plan = json.loads((config.workdir / "plan.json").read_text())
    except (OSError, ValueError):
        return {}
    return plan if isinstance(plan, dict) else {}


BENCH_PID = "bench.pid"


@agent_task("node.bench_serve")
def node_bench_serve(
    node: str, shape: dict[str, Any], gateway: dict[str, str] | None = None
) -> dict[str, Any]:
    """One sweep point of ``vllm bench serve`` against the engine this node serves
    (engine/bench_serve.py: the target, model and key come from the plan it started),
    or, with ``gateway``, through the console's gateway with the key made for the run.
    While it runs, the task's state is ``PROGRESS`` with tqdm's ``done``/``total``;
    the answer is the ``--save-result`` JSON, the printed table and the tool's version.
    Bounded by ``BENCH_TIMEOUT_S`` (default 2 h); ``node.bench_stop`` ends it early."""
    import json
    import subprocess
    import threading
    import uuid

    _check_node(node)
    plan = _saved_plan()
    if plan.get("role", "head") != "head":
        raise ValueError(f"{config.node_name} is not the head: benchmark rank 0")
    out_dir = config.workdir / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{uuid.uuid4().hex}.json"
    argv = bench_serve.bench_argv(
        shape,
        [str(a) for a in plan.get("argv", [])],
        str(out_dir),
        name,
        base_url=gateway["url"] if gateway else None,
    )
    command = _driver().bench_command(argv)
    key = gateway["key"] if gateway else (plan.get("env") or {}).get("VLLM_API_KEY", "")
    env = {**os.environ, "OPENAI_API_KEY": str(key)}
    timeout = float(os.environ.get("BENCH_TIMEOUT_S", "7200"))
    # the task and its id, read here: current_task is thread-local and the bar is read
    # on another thread
    task = current_task._get_current_object() if current_task else None
    task_id = task.request.id if task is not None else None
    proc = subprocess.Popen(  # an argv list, never a shell
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(config.workdir),
    )
    (config.workdir / BENCH_PID).write_text(str(proc.pid))
    errors: list[str] = []

    def follow_stderr() -> None:
        assert proc.stderr is not None
        last = 0.0
        while chunk := proc.stderr.read1(4096):  # type: ignore[attr-defined]
            text = chunk.decode(errors="replace")
            errors.append(text)
            seen = bench_serve.progress_of(text)
            if seen and task is not None and task_id and time.monotonic() - last > 0.5:
                last = time.monotonic()
                task.update_state(
                    task_id=task_id,
                    state="PROGRESS",
                    meta={"done": seen[0], "total": seen[1]},
                )

    printed_parts: list[bytes] = []

    def keep_stdout() -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(65536):  # type: ignore[attr-defined]
            printed_parts.append(chunk)

    # one reader per pipe (communicate() would read stderr too, and hide the bar)
    readers = [
        threading.Thread(target=follow_stderr, daemon=True),
        threading.Thread(target=keep_stdout, daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise ValueError(
            f"vllm bench serve ran past BENCH_TIMEOUT_S={timeout:.0f}s"
        ) from None
    finally:
        (config.workdir / BENCH_PID).unlink(missing_ok=True)
        for reader in readers:
            reader.join(timeout=5)
    printed = b"".join(printed_parts).decode(errors="replace")
    result_file = out_dir / name
    if proc.returncode != 0 or not result_file.exists():
        tail = "".join(errors)[-600:].replace("\r", "\n").strip().splitlines()
        raise ValueError(
            f"vllm bench serve exited {proc.returncode}: "
            + (tail[-1] if tail else printed[-300:])
        )
    try:
        result = json.loads(result_file.read_text())
    finally:
        result_file.unlink(missing_ok=True)
    return {
        "node": config.node_name,
        "result": result,
        "table": printed[printed.find("=") :][-4000:],
        "argv": argv,
        "tool_version": versions().get("vllm") or "",
        "driver": config.driver,
    }


@agent_task("node.bench_stop")
def node_bench_stop(node: str) -> dict[str, Any]:
    """End this node's running ``vllm bench serve`` (a cancelled benchmark); only a
    process whose command line is a bench serve is signalled."""
    _check_node(node)
    path = config.workdir / BENCH_PID
    try:
        proc = psutil.Process(int(path.read_text()))
        words = proc.cmdline()
    except (OSError, ValueError, psutil.Error):
        return {"node": config.node_name, "stopped": False}
    if "bench" not in words or "serve" not in words:
        return {"node": config.node_name, "stopped": False}
    proc.terminate()
    return {"node": config.node_name, "stopped": True}


@agent_task("sim.inject")
def sim_inject(node: str, fault: str, value: str | None = None) -> dict[str, Any]:
    """Inject a simulated fault (refused unless this node runs the sim driver).

    ``crash once|always`` also kills a running engine now, like a real crash would.
    """
    _check_node(node)
    injected = _driver().fault_inject(config.node_name, fault, value)
    killed = False
    if fault == "crash":
        driver = get_driver(config.driver)
        spec = _spec(argv=_saved_argv())
        status = driver.status(spec)
        if status.state == "running" and status.pid:
            # what a rank dying of a device fault leaves: its plog and EE9999 on stderr
            _driver().leave_crash_traces(
                config.node_name, config.workdir / "engine.log", status.pid
            )
            # SIGKILL the tree without the driver's stop bookkeeping: the engine "ended on
            # its own" (status exited), exactly what the console sees after a real crash.
            try:
                root = psutil.Process(status.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            for proc in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(tree, timeout=5)
            killed = bool(tree)
    return {"node": config.node_name, **injected, "killed_engine": killed}


@agent_task("sim.clear")
def sim_clear(node: str) -> dict[str, Any]:
    """Clear every simulated fault on this node."""
    _check_node(node)
    return {"node": config.node_name, **_driver().fault_clear(config.node_name)}


@agent_task("sim.state")
def sim_state(node: str) -> dict[str, Any]:
    """The simulated node's config, faults and engine activity."""
    _check_node(node)
    return {"node": config.node_name, **_driver().sim_state(config.node_name)}
