"""The benchmark tasks: one ``vllm bench serve`` sweep point against this node's engine
(node.bench_serve) and its early end (node.bench_stop)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from typing import Any

import psutil
from celery import current_task

from engine import bench_serve
from engine.agent.boundary import _check_node, _driver, agent_task, config
from engine.preflight import versions


def _saved_plan() -> dict[str, Any]:
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
    key = gateway["key"] if gateway else (plan.get("env") or {}).get("VLLM_API_KEY", "")
    returncode, printed, errors = _run_reporting_progress(
        _driver().bench_command(argv), {**os.environ, "OPENAI_API_KEY": str(key)}
    )
    result_file = out_dir / name
    if returncode != 0 or not result_file.exists():
        tail = "".join(errors)[-600:].replace("\r", "\n").strip().splitlines()
        raise ValueError(
            f"vllm bench serve exited {returncode}: "
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


def _run_reporting_progress(
    command: list[str], env: dict[str, str]
) -> tuple[int, str, list[str]]:
    """Run the bench command to its end (its pid in ``BENCH_PID`` meanwhile, for
    ``node.bench_stop``), the task's state following the progress bar on its stderr:
    its exit code, what it printed and its stderr as read."""
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
    return proc.returncode, b"".join(printed_parts).decode(errors="replace"), errors


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
