"""Process driver: runs ``vllm serve`` as a detached process tree on this host.

Files in ``spec.workdir``:

- ``engine.log``  stdout+stderr of the engine, appended across runs;
- ``engine.pid``  JSON ``{"pid", "create_time", "argv", "started_at"}`` of the runner
  (pid + create time, so a recycled pid is never mistaken for the engine);
- ``engine.exit`` JSON ``{"exit_code", "pid", "ended_at"}`` written by the runner
  (``_runner.py``, a small stdlib supervisor) when the engine ends; the exit code
  therefore survives a restart of the agent. Negative codes mean "killed by signal N";
- ``engine.lock`` flock so two agents' start/stop calls on one node do not interleave.

The engine runs in its own session (``start_new_session=True``) so it outlives the
agent, and stop() can find every process of the tree, including reparented orphans.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import psutil

from engine.drivers.base import Driver, DriverError, EngineSpec, EngineStatus

RUNNER = str(Path(__file__).with_name("_runner.py"))
LOG_FILE = "engine.log"
PID_FILE = "engine.pid"
EXIT_FILE = "engine.exit"
LOCK_FILE = "engine.lock"
STATUS_TAIL_LINES = 20
KILL_WAIT_S = 5.0


def _spawn(
    argv: list[str], *, env: dict[str, str], cwd: str, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached, output appended to ``log`` (one place to mock)."""
    return subprocess.Popen(
        argv,  # an argv list, never a shell string
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        # own session: survives the agent, and stop() can find the whole tree
        start_new_session=True,
        close_fds=True,
    )


def tail_file(path: Path, lines: int, *, start: int = 0) -> list[str]:
    """Last ``lines`` lines of ``path`` from byte offset ``start``; [] if missing."""
    if lines <= 0:
        return []
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            pos, data = end, b""
            while pos > start and data.count(b"\n") <= lines:
                step = min(65536, pos - start)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace")
    return text.splitlines()[-lines:]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit code not recorded (the runner itself was killed)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    if code == 127:
        return "exit code 127 (program not found)"
    return f"exit code {code}"


class ProcessDriver(Driver):
    """Runs the engine as a local process tree (files: see the module docstring)."""

    name = "process"

    def __init__(self, *, start_check_s: float = 1.0) -> None:
        self.start_check_s = (
            start_check_s  # an engine that dies this fast had bad argv/env
        )

    # -- what to run: the sim driver overrides this and nothing else ------------------

    def command(self, spec: EngineSpec) -> tuple[list[str], dict[str, str]]:
        """Return the argv and the full environment to start ``spec`` with."""
        env = dict(os.environ)
        env.update(spec.env)
        return list(spec.argv), env

    # -- Driver API -----------------------------------------------------------------

    def start(self, spec: EngineSpec) -> EngineStatus:
        wd = self._workdir(spec)
        with self._locked(wd):
            running = self._runner(wd)
            if running is not None:
                raise DriverError(
                    f"engine on {spec.node} is already running (pid {running.pid}); "
                    "stop it first",
                    permanent=True,
                )
            argv, env = self.command(spec)
            if not argv:
                raise DriverError(f"engine on {spec.node}: empty argv", permanent=True)
            (wd / EXIT_FILE).unlink(missing_ok=True)
            log_path = wd / LOG_FILE
            offset = log_path.stat().st_size if log_path.exists() else 0
            runner_argv = [sys.executable, RUNNER, str(wd / EXIT_FILE), "--", *argv]
            with open(log_path, "ab") as log:
                try:
                    proc = _spawn(runner_argv, env=env, cwd=str(wd), log=log)
                except OSError as e:
                    raise DriverError(
                        f"engine on {spec.node}: cannot start the runner: {e}",
                        permanent=True,
                    ) from e
            try:
                create_time = psutil.Process(proc.pid).create_time()
            except psutil.NoSuchProcess:
                create_time = 0.0
            _write_json(
                wd / PID_FILE,
                {
                    "pid": proc.pid,
                    "create_time": create_time,
                    "argv": argv,
                    "started_at": time.time(),
                },
            )
            # reap the runner when it ends, so it never lingers as a zombie of the agent
            threading.Thread(
                target=proc.wait, name=f"reap-engine-{spec.node}", daemon=True
            ).start()
            deadline = time.monotonic() + self.start_check_s
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            if proc.poll() is not None:
                code = self._exit_code(wd, fallback=proc.returncode)
                tail = tail_file(log_path, 40, start=offset)
                raise DriverError(
                    f"engine on {spec.node} exited right after start "
                    f"({_describe_exit(code)}); last log lines:\n" + "\n".join(tail),
                    permanent=True,  # same argv/env will fail the same way
                )
        return self.status(spec)

    def stop(self, spec: EngineSpec, *, grace_s: float = 30.0) -> EngineStatus:
        wd = self._workdir(spec)
        with self._locked(wd):
            record = _read_json(wd / PID_FILE)
            if record is not None:
                procs = self._tree(record)
                for p in procs:
                    try:
                        p.terminate()
                    except psutil.NoSuchProcess:
                        pass
                _gone, alive = psutil.wait_procs(procs, timeout=grace_s)
                for p in alive:
                    try:
                        p.kill()  # ignored TERM for grace_s: no orphan is left behind
                    except psutil.NoSuchProcess:
                        pass
                _gone, still = psutil.wait_procs(alive, timeout=KILL_WAIT_S)
                if still:
                    pids = ", ".join(str(p.pid) for p in still)
                    raise DriverError(
                        f"engine on {spec.node}: processes {pids} survived SIGKILL"
                    )
                if not (wd / EXIT_FILE).exists():
                    _write_json(
                        wd / EXIT_FILE,
                        {
                            "exit_code": None,
                            "pid": record.get("pid"),
                            "ended_at": time.time(),
                        },
                    )
                (wd / PID_FILE).unlink(missing_ok=True)
        status = self.status(spec)
        return status

    def status(self, spec: EngineSpec) -> EngineStatus:
        wd = Path(spec.workdir)
        tail = tail_file(wd / LOG_FILE, STATUS_TAIL_LINES)
        record = _read_json(wd / PID_FILE)
        if record is None:
            code = self._exit_code(wd)
            detail = (
                "not started"
                if not (wd / EXIT_FILE).exists()
                else f"stopped; last run: {_describe_exit(code)}"
            )
            return EngineStatus(
                state="stopped", exit_code=code, log_tail=tail, detail=detail
            )
        runner = self._runner(wd, record)
        if runner is None:
            code = self._exit_code(wd)
            return EngineStatus(
                state="exited",
                pid=int(record["pid"]),
                exit_code=code,
                log_tail=tail,
                detail=f"engine ended on its own: {_describe_exit(code)}",
            )
        try:
            children = runner.children(recursive=True)
            tree = [runner, *children]
            rss = 0
            for p in tree:
                try:
                    rss += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            engine_pid = children[0].pid if children else runner.pid
            uptime = max(0.0, time.time() - runner.create_time())
        except psutil.NoSuchProcess:
            return EngineStatus(
                state="unknown",
                pid=int(record["pid"]),
                log_tail=tail,
                detail="process vanished",
            )
        return EngineStatus(
            state="running",
            pid=engine_pid,
            uptime_s=uptime,
            log_tail=tail,
            rss_mb=rss / (1024 * 1024),
            detail=f"{len(tree)} processes (runner pid {runner.pid})",
        )

    def logs(self, spec: EngineSpec, lines: int = 200) -> list[str]:
        return tail_file(Path(spec.workdir) / LOG_FILE, lines)

    # -- helpers --------------------------------------------------------------------

    @staticmethod
    def _workdir(spec: EngineSpec) -> Path:
        wd = Path(spec.workdir)
        try:
            wd.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DriverError(
                f"engine on {spec.node}: cannot create workdir {wd}: {e}",
                permanent=True,
            ) from e
        return wd

    @staticmethod
    @contextmanager
    def _locked(wd: Path) -> Iterator[None]:
        with open(wd / LOCK_FILE, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @staticmethod
    def _exit_code(wd: Path, fallback: int | None = None) -> int | None:
        data = _read_json(wd / EXIT_FILE)
        if data is None:
            return fallback
        code = data.get("exit_code")
        return int(code) if code is not None else None

    @staticmethod
    def _runner(
        wd: Path, record: dict[str, Any] | None = None
    ) -> psutil.Process | None:
        """The live runner named by the pid file; None if gone, a zombie or recycled."""
        record = record if record is not None else _read_json(wd / PID_FILE)
        if record is None:
            return None
        try:
            p = psutil.Process(int(record["pid"]))
            if abs(p.create_time() - float(record.get("create_time", 0.0))) > 0.5:
                return None  # the pid was recycled by an unrelated process
            if p.status() == psutil.STATUS_ZOMBIE:
                return None
        except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, ValueError):
            return None
        return p

    @classmethod
    def _tree(cls, record: dict[str, Any]) -> list[psutil.Process]:
        """Every live process of the engine, children first.

        The runner's descendants are collected before any signal (so none is missed
        after reparenting), plus anything left in its session.
        """
        procs: dict[int, psutil.Process] = {}
        sid = int(record.get("pid", 0))
        born = float(record.get("create_time", 0.0))
        runner = None
        try:
            p = psutil.Process(sid)
            if abs(p.create_time() - born) > 0.5:
                # Recycled pid. Linux never reuses a pid still naming a session, so
                # nothing of ours is left; that session belongs to someone else.
                return []
            runner = p
            for child in runner.children(recursive=True):
                procs[child.pid] = child
        except psutil.NoSuchProcess:
            pass
        if sid > 1:
            for p in psutil.process_iter():
                try:
                    if p.pid not in procs and p.pid != sid and os.getsid(p.pid) == sid:
                        procs[p.pid] = p  # an orphan left in the engine's session
                except (ProcessLookupError, PermissionError, psutil.Error):
                    continue
        ordered = list(procs.values())
        if runner is not None:
            ordered.append(runner)  # children first, the runner last
        return ordered
