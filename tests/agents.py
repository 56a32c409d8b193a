"""Start real node-agent worker processes for integration tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGTERM to the child when the test process dies, so a
    killed test run (CI timeout, Ctrl-C) leaves no worker behind."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(
        1, signal.SIGTERM
    )  # PR_SET_PDEATHSIG


@contextmanager
def agent_worker(
    node: str, *, driver: str = "sim", extra_env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Run ``celery -A engine.agent worker -Q node.<node>`` until the block ends; wait until it answers."""
    env = {
        **os.environ,
        "NODE_NAME": node,
        "ENGINE_DRIVER": driver,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_RESULT_BACKEND": settings.CELERY_RESULT_BACKEND,
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "engine.agent",
        "worker",
        "-Q",
        f"node.{node}",
        "-n",
        f"agent.{node}@test",
        "--pool",
        "threads",
        "--concurrency",
        "4",
        "--without-mingle",
        "--without-gossip",
        "--loglevel",
        "WARNING",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent,
    )
    try:
        from console.celery import app

        deadline = time.monotonic() + 60
        while True:
            try:
                app.send_task("node.heartbeat", kwargs={"node": node}).get(timeout=5)
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read() if proc.stdout else ""
                    raise RuntimeError(
                        f"agent {node} did not come up:\n{out[-3000:]}"
                    ) from None
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def database_url() -> str:
    """URL of the test database, for worker processes that must share it."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


@contextmanager
def control_worker(
    extra_env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """Run ``celery -A console worker -Q control`` against the test database until the block ends."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        **(extra_env or {}),
    }
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "console",
        "worker",
        "-Q",
        "control",
        "-n",
        f"control.{os.getpid()}.{time.monotonic_ns()}@test",
        "--pool",
        "threads",
        "--concurrency",
        "2",
        "--without-mingle",
        "--without-gossip",
        "--loglevel",
        "WARNING",
    ]
    log = open(
        Path(os.environ["CONSOLE_VAR_DIR"]) / f"control-{time.monotonic_ns()}.log", "w+"
    )  # noqa: SIM115
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent,
    )
    try:
        from console.celery import app

        deadline = time.monotonic() + 60
        while True:
            try:
                app.send_task("control.heartbeat", queue="control").get(timeout=5)
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(
                        f"control worker did not come up:\n{log.read()[-3000:]}"
                    ) from None
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


@contextmanager
def agents(
    nodes: list[str],
    extra_env: dict[str, str] | None = None,
    npu_ips: dict[str, list[str]] | None = None,
) -> Iterator[dict[str, subprocess.Popen[str]]]:
    """Several agent workers at once (started together, stopped together)."""
    from contextlib import ExitStack

    try:
        with ExitStack() as stack:
            procs = {}
            for node in nodes:
                env = dict(extra_env or {})
                if npu_ips and node in npu_ips:
                    env["SIM_NPU_IPS"] = ",".join(npu_ips[node])
                procs[node] = stack.enter_context(agent_worker(node, extra_env=env))
            yield procs
    finally:  # after the agents have stopped
        state_dir = (extra_env or {}).get("SIM_STATE_DIR")
        if state_dir:
            reap_sim_engines(state_dir)


def sim_engines(state_dir: str | Path) -> list[psutil.Process]:
    """The sim engine processes (any rank) whose simulated hardware lives in ``state_dir``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "engine.sim.vllm" in cmd and (proc.info["environ"] or {}).get(
                "SIM_STATE_DIR"
            ) == str(state_dir):
                found.append(proc)
        except (psutil.Error, TypeError):
            continue
    return found


def reap_sim_engines(state_dir: str | Path) -> int:
    """Kill the sim engines a test left running. Engines outlive their agent by design (as a
    real vllm serve outlives a restarted agent), so without this every test that ends with a
    running cluster would leave four engines eating the CPU of the tests after it."""
    procs = sim_engines(state_dir)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=10)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    return len(procs)
