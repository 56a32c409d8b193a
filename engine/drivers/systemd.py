"""systemd driver: one unit ``vllm-<node>.service`` per node (systemctl, journalctl).

start() writes the unit and its EnvironmentFile (rendered by engine.render from the
node's plan), runs ``systemctl daemon-reload`` and ``systemctl start``. Logs live in
the journal. Every external call goes through ``_run``.

Settings (environment, with defaults):

- ``AGENT_SYSTEMD_UNIT_DIR`` (/etc/systemd/system)
- ``AGENT_ENGINE_ENV_DIR`` (/etc/vllm)
- ``AGENT_ENGINE_USER`` (vllm)
- ``AGENT_VLLM_EXECUTABLE`` (absolute path for argv[0]; default: ``vllm`` found in PATH)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from engine.drivers.base import Driver, DriverError, EngineSpec, EngineStatus
from engine.plans import NodePlan
from engine.render import render_env_file, render_systemd_unit

SYSTEMCTL_TIMEOUT_S = 30.0
STATUS_TAIL_LINES = 20
SHOW_PROPERTIES = (
    "MainPID",  # the engine's pid while it runs, 0 otherwise
    "ActiveEnterTimestamp",  # human-readable start time, for the detail line
    "ActiveEnterTimestampMonotonic",  # µs since boot: uptime without timezone parsing
    "ExecMainStatus",  # exit status of the last main process
    "SubState",  # "auto-restart" = it crashed and Restart=always will retry
    "MemoryCurrent",  # the unit cgroup's memory: the whole tree
)
# systemd prints uint64 max when MemoryCurrent is not accounted
UNSET_MEMORY = 2**64 - 1


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str


def _tail(text: str, n: int = 10) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def _run(argv: list[str], timeout: float) -> RunResult:
    """Run one systemctl/journalctl command and return its output (one place to mock).

    Raises DriverError when the binary is missing (permanent) or the call times out.
    """
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as e:
        raise DriverError(
            f"{argv[0]} not found: this host has no systemd; use the process driver",
            permanent=True,
        ) from e
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else ""
        raise DriverError(
            f"{' '.join(argv)} timed out after {timeout:.0f} s: {_tail(out)}"
        ) from e
    return RunResult(done.returncode, done.stdout, done.stderr)


def unit_name(node: str) -> str:
    return f"vllm-{node}.service"


def _plan_for(spec: EngineSpec) -> NodePlan:
    """Adapt an EngineSpec to engine.plans.NodePlan, which engine.render consumes."""
    return NodePlan(
        name=spec.node,
        rank=spec.rank,
        role=spec.role,
        argv=list(spec.argv),
        env=dict(spec.env),
    )


class SystemdDriver(Driver):
    """Drives ``vllm-<node>.service``; ``exit_code`` is systemd's ExecMainStatus."""

    name = "systemd"

    def __init__(
        self,
        *,
        unit_dir: str | None = None,
        env_dir: str | None = None,
        user: str | None = None,
        executable: str | None = None,
        start_check_s: float = 1.0,
    ) -> None:
        self.unit_dir = Path(
            unit_dir or _env("AGENT_SYSTEMD_UNIT_DIR", "/etc/systemd/system")
        )
        self.env_dir = Path(env_dir or _env("AGENT_ENGINE_ENV_DIR", "/etc/vllm"))
        self.user = user or _env("AGENT_ENGINE_USER", "vllm")
        # absolute path of `vllm` (e.g. the venv's bin/vllm); default: looked up in PATH
        self.executable = executable or os.environ.get("AGENT_VLLM_EXECUTABLE") or None
        self.start_check_s = start_check_s

    # -- Driver API -----------------------------------------------------------------

    def start(self, spec: EngineSpec) -> EngineStatus:
        unit = unit_name(spec.node)
        if self._is_active(unit) == "active":
            raise DriverError(
                f"{unit} is already active; stop it first", permanent=True
            )
        self.install(spec)
        self._systemctl(["systemctl", "start", unit], "start")
        time.sleep(self.start_check_s)  # a unit that dies this fast had bad argv/env
        status = self.status(spec)
        if status.state != "running":
            tail = self.logs(spec, 40)
            raise DriverError(
                f"{unit} did not stay up ({status.detail}); last journal lines:\n"
                + "\n".join(tail),
                permanent=True,
            )
        return status

    def stop(self, spec: EngineSpec, *, grace_s: float = 30.0) -> EngineStatus:
        unit = unit_name(spec.node)
        # systemd applies the unit's TimeoutStopSec, then SIGKILLs the whole cgroup
        res = _run(["systemctl", "stop", unit], timeout=grace_s + SYSTEMCTL_TIMEOUT_S)
        if res.returncode not in (0, 5):  # 5: unit not loaded, so nothing to stop
            raise _failed(f"systemctl stop {unit}", res)
        return self.status(spec)

    def status(self, spec: EngineSpec) -> EngineStatus:
        unit = unit_name(spec.node)
        active = self._is_active(unit)
        props = self._show(unit)
        tail = self.logs(spec, STATUS_TAIL_LINES)
        pid = _int(props.get("MainPID")) or None
        code = _int(props.get("ExecMainStatus"))
        sub = props.get("SubState", "")
        since = props.get("ActiveEnterTimestamp", "")
        if active == "active" or (
            active in ("activating", "reloading") and sub != "auto-restart"
        ):
            mono = _int(props.get("ActiveEnterTimestampMonotonic"))
            uptime = max(0.0, time.monotonic() - mono / 1e6) if mono else None
            mem = _int(props.get("MemoryCurrent"))
            rss = mem / (1024 * 1024) if mem and mem != UNSET_MEMORY else None
            detail = f"{unit} {active} ({sub}) since {since}".strip()
            return EngineStatus(
                "running",
                pid=pid,
                uptime_s=uptime,
                log_tail=tail,
                rss_mb=rss,
                detail=detail,
            )
        if active == "failed" or sub == "auto-restart":
            detail = f"{unit} {active} ({sub}): main process exited with status {code}"
            return EngineStatus(
                "exited", pid=None, exit_code=code, log_tail=tail, detail=detail
            )
        if active in ("inactive", "deactivating"):
            return EngineStatus(
                "stopped", exit_code=code, log_tail=tail, detail=f"{unit} {active}"
            )
        return EngineStatus(
            "unknown",
            log_tail=tail,
            detail=f"{unit}: systemctl is-active said {active!r}",
        )

    def logs(self, spec: EngineSpec, lines: int = 200) -> list[str]:
        res = _run(
            [
                "journalctl",
                "-u",
                unit_name(spec.node),
                "-n",
                str(lines),
                "--no-pager",
                "-o",
                "cat",
            ],
            timeout=SYSTEMCTL_TIMEOUT_S,
        )
        if res.returncode != 0:
            raise _failed("journalctl", res)
        out = res.stdout.splitlines()
        return [] if out == ["-- No entries --"] else out

    # -- unit files -----------------------------------------------------------------

    def install(self, spec: EngineSpec) -> tuple[Path, Path]:
        """Write ``spec``'s unit and env file, reload systemd; return both paths.

        Raises DriverError (permanent) when the files cannot be written.
        """
        unit = unit_name(spec.node)
        unit_path = self.unit_dir / unit
        env_path = self.env_dir / f"vllm-{spec.node}.env"
        plan = _plan_for(spec)
        try:
            unit_text = render_systemd_unit(
                plan,
                user=self.user,
                env_file=str(env_path),
                executable=self._executable(spec),
            )
            env_text = render_env_file(plan)
        except ValueError as e:
            raise DriverError(f"cannot render {unit}: {e}", permanent=True) from e
        try:
            self.env_dir.mkdir(parents=True, exist_ok=True)
            # the env file holds tokens (HF_TOKEN, VLLM_API_KEY): root only; systemd reads it as root
            _atomic_write(env_path, env_text, mode=0o600)
            _atomic_write(unit_path, unit_text, mode=0o644)
        except OSError as e:
            raise DriverError(
                f"cannot write {unit_path} / {env_path}: {e}; run the agent as root",
                permanent=True,
            ) from e
        self._systemctl(["systemctl", "daemon-reload"], "daemon-reload")
        return unit_path, env_path

    # -- helpers --------------------------------------------------------------------

    def _executable(self, spec: EngineSpec) -> str | None:
        """Absolute path for argv[0] (older systemd needs one in ExecStart), or None."""
        if self.executable:
            return self.executable
        if not spec.argv or os.path.isabs(spec.argv[0]):
            return None
        path = spec.env.get("PATH") or os.environ.get("PATH")
        return shutil.which(spec.argv[0], path=path)

    def _systemctl(self, argv: list[str], what: str) -> RunResult:
        res = _run(argv, timeout=SYSTEMCTL_TIMEOUT_S)
        if res.returncode != 0:
            raise _failed(f"systemctl {what}", res)
        return res

    @staticmethod
    def _is_active(unit: str) -> str:
        # non-zero rc is normal here (3 = inactive); the word on stdout is the answer
        res = _run(["systemctl", "is-active", unit], timeout=SYSTEMCTL_TIMEOUT_S)
        words = res.stdout.split()
        return words[0] if words else "unknown"

    @staticmethod
    def _show(unit: str) -> dict[str, str]:
        props = ",".join(SHOW_PROPERTIES)
        res = _run(
            ["systemctl", "show", "-p", props, unit], timeout=SYSTEMCTL_TIMEOUT_S
        )
        if res.returncode != 0:
            raise _failed(f"systemctl show {unit}", res)
        out: dict[str, str] = {}
        for line in res.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
        return out


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _failed(what: str, res: RunResult) -> DriverError:
    return DriverError(
        f"{what} failed (rc {res.returncode}): {_tail(res.stderr or res.stdout)}"
    )


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _atomic_write(path: Path, text: str, *, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    # created with its final mode: no moment where a token sits in a world-readable file
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    os.fchmod(fd, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
