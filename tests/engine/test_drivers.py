"""Drivers: process/sim run real process trees; systemd is patched at its _run seam."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import psutil
import pytest

from engine.drivers import DRIVERS, DriverError, EngineSpec, get_driver
from engine.drivers import systemd as systemd_mod
from engine.drivers.process import ProcessDriver
from engine.drivers.sim import REPO_ROOT, SimDriver
from engine.drivers.systemd import RunResult, SystemdDriver
from engine.sim import BIN_DIR

FAKE = str(Path(__file__).resolve().parents[1] / "data" / "fake_engine.py")


def _spec(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> EngineSpec:
    return EngineSpec(
        node="ascend-01",
        rank=0,
        role="head",
        argv=[sys.executable, FAKE, "--pidfile", str(tmp_path / "pids"), *args],
        env=env or {},
        workdir=str(tmp_path / "agent" / "ascend-01"),
    )


def _wait_pids(tmp_path: Path) -> tuple[int, int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        p = tmp_path / "pids"
        if p.exists():
            main, child = p.read_text().split()
            return int(main), int(child)
        time.sleep(0.02)
    raise AssertionError("fake engine never wrote its pids")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def driver() -> ProcessDriver:
    return ProcessDriver(start_check_s=0.3)


@pytest.fixture
def cleanup() -> Iterator[list[tuple[ProcessDriver, EngineSpec]]]:
    started: list[tuple[ProcessDriver, EngineSpec]] = []
    yield started
    for d, spec in started:
        d.stop(spec, grace_s=1)


# -- registry ---------------------------------------------------------------------


def test_it_builds_every_registered_driver() -> None:
    for name in DRIVERS:
        assert get_driver(name).name == name


def test_it_lists_known_drivers_for_an_unknown_name() -> None:
    with pytest.raises(ValueError) as e:
        get_driver("docker")
    assert (
        "process" in str(e.value)
        and "systemd" in str(e.value)
        and "sim" in str(e.value)
    )


def test_it_round_trips_spec_and_status_dicts(tmp_path: Path) -> None:
    spec = _spec(tmp_path, env={"A": "1"})
    assert EngineSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


# -- process driver -----------------------------------------------------------------


def test_it_starts_reports_and_stops_a_process_tree(
    tmp_path: Path,
    driver: ProcessDriver,
    cleanup: list[tuple[ProcessDriver, EngineSpec]],
) -> None:
    spec = _spec(tmp_path, env={"FAKE_MARK": "mark-42"})
    cleanup.append((driver, spec))
    st = driver.start(spec)
    main, child = _wait_pids(tmp_path)
    assert st.state == "running"
    st = driver.status(spec)
    assert st.state == "running" and st.pid == main
    assert st.rss_mb is not None and st.rss_mb > 1
    assert st.uptime_s is not None and st.uptime_s >= 0
    assert _alive(child)

    st = driver.stop(spec, grace_s=5)
    assert st.state == "stopped"
    assert st.exit_code == -15  # recorded by the runner: killed by SIGTERM
    assert not _alive(main) and not _alive(child)
    assert any("FAKE_MARK=mark-42" in line for line in driver.logs(spec))


def test_it_refuses_a_second_copy_while_one_runs(
    tmp_path: Path,
    driver: ProcessDriver,
    cleanup: list[tuple[ProcessDriver, EngineSpec]],
) -> None:
    spec = _spec(tmp_path)
    cleanup.append((driver, spec))
    driver.start(spec)
    with pytest.raises(DriverError) as e:
        driver.start(spec)
    assert "already running" in e.value.message
    assert e.value.permanent


def test_it_kills_children_that_ignore_sigterm(
    tmp_path: Path,
    driver: ProcessDriver,
    cleanup: list[tuple[ProcessDriver, EngineSpec]],
) -> None:
    spec = _spec(tmp_path, "--ignore-term", "--child-ignore-term")
    cleanup.append((driver, spec))
    driver.start(spec)
    main, child = _wait_pids(tmp_path)
    st = driver.stop(spec, grace_s=0.5)
    assert st.state == "stopped"
    assert not _alive(main) and not _alive(child)


def test_it_kills_orphans_left_in_the_session(
    tmp_path: Path,
    driver: ProcessDriver,
    cleanup: list[tuple[ProcessDriver, EngineSpec]],
) -> None:
    # the engine's child is orphaned (its parent is SIGKILLed) and reparented away
    spec = _spec(tmp_path, "--child-ignore-term")
    cleanup.append((driver, spec))
    driver.start(spec)
    main, child = _wait_pids(tmp_path)
    os.kill(main, 9)
    deadline = time.monotonic() + 5
    while _alive(main) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _alive(child)
    driver.stop(spec, grace_s=0.5)
    assert not _alive(child)


def test_it_raises_with_the_log_tail_when_the_engine_dies_at_once(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    spec = _spec(tmp_path, "--exit", "3")
    with pytest.raises(DriverError) as e:
        driver.start(spec)
    assert "exit code 3" in e.value.message
    assert "Did not receive response from front-end process" in e.value.message
    st = driver.status(spec)
    assert st.state == "exited" and st.exit_code == 3


def test_it_reports_a_missing_binary_as_exit_127(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    spec = _spec(tmp_path)
    spec.argv = ["/nonexistent/vllm", "serve", "/models/x"]
    with pytest.raises(DriverError) as e:
        driver.start(spec)
    assert "127" in e.value.message and "cannot execute" in e.value.message


def test_it_records_the_exit_code_of_an_engine_that_ends_on_its_own(
    tmp_path: Path,
    driver: ProcessDriver,
    cleanup: list[tuple[ProcessDriver, EngineSpec]],
) -> None:
    spec = _spec(tmp_path)
    cleanup.append((driver, spec))
    driver.start(spec)
    main, _child = _wait_pids(tmp_path)
    os.kill(main, 9)
    deadline = time.monotonic() + 10
    while driver.status(spec).state == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    st = driver.status(spec)
    assert st.state == "exited"
    assert st.exit_code == -9
    assert "SIGKILL" in st.detail


def test_it_stops_idempotently(tmp_path: Path, driver: ProcessDriver) -> None:
    spec = _spec(tmp_path)
    assert driver.stop(spec, grace_s=1).state == "stopped"
    assert driver.stop(spec, grace_s=1).state == "stopped"
    assert driver.status(spec).detail == "not started"


def test_it_ignores_a_pid_file_whose_pid_was_recycled(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    spec = _spec(tmp_path)
    wd = Path(spec.workdir)
    wd.mkdir(parents=True)
    # our own pid, but with a create time that is not ours: a recycled pid
    (wd / "engine.pid").write_text(json.dumps({"pid": os.getpid(), "create_time": 1.0}))
    assert driver.status(spec).state == "exited"
    driver.stop(spec, grace_s=0.1)  # must not signal the test process
    assert _alive(os.getpid())


def test_it_tails_only_the_requested_number_of_lines(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    spec = _spec(tmp_path)
    wd = Path(spec.workdir)
    wd.mkdir(parents=True)
    (wd / "engine.log").write_text("".join(f"line {i}\n" for i in range(100_000)))
    assert driver.logs(spec, 3) == ["line 99997", "line 99998", "line 99999"]


# -- sim driver -----------------------------------------------------------------------


def test_it_swaps_vllm_serve_for_the_simulator(tmp_path: Path) -> None:
    spec = EngineSpec(
        node="ascend-02",
        rank=1,
        role="headless",
        argv=[
            "vllm",
            "serve",
            "/models/Qwen3.5",
            "--headless",
            "--data-parallel-start-rank",
            "1",
        ],
        env={"HCCL_IF_IP": "127.0.1.2"},
        workdir=str(tmp_path),
    )
    with patch.dict(
        os.environ, {"SIM_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": "/x"}
    ):
        argv, env = SimDriver().command(spec)
    assert argv == [
        sys.executable, "-m", "engine.sim.vllm", "serve",
        "/models/Qwen3.5", "--headless", "--data-parallel-start-rank", "1",
    ]  # fmt: skip
    assert env["PATH"].split(os.pathsep)[0] == str(BIN_DIR)
    assert env["SIM_NODE"] == "ascend-02"
    assert env["SIM_STATE_DIR"] == str(tmp_path / "state")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO_ROOT), "/x"]
    assert env["SIM_PYTHON"] == sys.executable
    assert env["HCCL_IF_IP"] == "127.0.1.2"


def test_it_refuses_sim_argv_that_is_not_vllm_serve(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    with pytest.raises(DriverError) as e:
        SimDriver().command(spec)
    assert "vllm serve" in e.value.message and e.value.permanent


def test_it_runs_the_sim_vllm_module_help() -> None:
    # the same interpreter/PYTHONPATH the sim driver hands the engine
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "engine.sim.vllm", "serve", "--help"],
        capture_output=True, text=True, timeout=60, env=env, cwd=str(REPO_ROOT),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--data-parallel-size" in done.stdout


# -- systemd driver (no systemd here: patched at the seam) ---------------------------


def _systemd_replies(active: str, show: str, journal: str = "") -> object:
    def fake(argv: list[str], timeout: float) -> RunResult:
        assert timeout > 0
        if argv[:2] == ["systemctl", "is-active"]:
            return RunResult(0 if active == "active" else 3, active + "\n", "")
        if argv[:2] == ["systemctl", "show"]:
            return RunResult(0, show, "")
        if argv[0] == "journalctl":
            return RunResult(0, journal, "")
        return RunResult(0, "", "")

    return fake


def test_it_reads_systemd_status_through_the_seam(tmp_path: Path) -> None:
    mono = int((time.monotonic() - 120) * 1e6)
    show = (
        "MainPID=4242\nActiveEnterTimestamp=Tue 2025-10-28 21:46:46 CST\n"
        f"ActiveEnterTimestampMonotonic={mono}\nExecMainStatus=0\nSubState=running\n"
        "MemoryCurrent=2147483648\n"
    )
    with patch("engine.drivers.systemd._run", autospec=True) as run:
        run.side_effect = _systemd_replies("active", show, "INFO started\nINFO ready\n")
        st = SystemdDriver(unit_dir=str(tmp_path)).status(_spec(tmp_path))
    assert st.state == "running" and st.pid == 4242
    assert st.uptime_s is not None and st.uptime_s >= 120
    assert st.rss_mb == 2048
    assert st.log_tail == ["INFO started", "INFO ready"]
    argvs = [c.args[0] for c in run.call_args_list]
    assert ["systemctl", "is-active", "vllm-ascend-01.service"] in argvs
    assert [
        "systemctl", "show", "-p",
        "MainPID,ActiveEnterTimestamp,ActiveEnterTimestampMonotonic,ExecMainStatus,SubState,MemoryCurrent",
        "vllm-ascend-01.service",
    ] in argvs  # fmt: skip
    assert [
        "journalctl", "-u", "vllm-ascend-01.service",
        "-n", "20", "--no-pager", "-o", "cat",
    ] in argvs  # fmt: skip


def test_it_reports_a_failed_unit_as_exited_with_its_status(tmp_path: Path) -> None:
    show = "MainPID=0\nExecMainStatus=1\nSubState=failed\n"
    with patch("engine.drivers.systemd._run", autospec=True) as run:
        run.side_effect = _systemd_replies("failed", show)
        st = SystemdDriver().status(_spec(tmp_path))
    assert st.state == "exited" and st.exit_code == 1 and st.pid is None


def test_it_reports_an_auto_restarting_unit_as_exited(tmp_path: Path) -> None:
    show = "MainPID=0\nExecMainStatus=2\nSubState=auto-restart\n"
    with patch("engine.drivers.systemd._run", autospec=True) as run:
        run.side_effect = _systemd_replies("activating", show)
        st = SystemdDriver().status(_spec(tmp_path))
    assert st.state == "exited" and st.exit_code == 2 and "auto-restart" in st.detail


def test_it_stops_a_unit_and_tolerates_an_unknown_one(tmp_path: Path) -> None:
    show = "MainPID=0\nExecMainStatus=0\nSubState=dead\n"
    replies = _systemd_replies("inactive", show)

    def fake(argv: list[str], timeout: float) -> RunResult:
        if argv[:2] == ["systemctl", "stop"]:
            return RunResult(
                5, "", "Failed to stop vllm-ascend-01.service: Unit not loaded.\n"
            )
        return replies(argv, timeout)  # type: ignore[operator]

    with patch("engine.drivers.systemd._run", autospec=True) as run:
        run.side_effect = fake
        st = SystemdDriver().stop(_spec(tmp_path), grace_s=10)
    assert st.state == "stopped"
    stop_call = run.call_args_list[0]
    assert stop_call.args[0] == ["systemctl", "stop", "vllm-ascend-01.service"]
    assert stop_call.kwargs["timeout"] >= 10


def test_it_raises_when_systemctl_stop_fails(tmp_path: Path) -> None:
    with patch("engine.drivers.systemd._run", autospec=True) as run:
        run.return_value = RunResult(1, "", "Access denied\n")
        with pytest.raises(DriverError) as e:
            SystemdDriver().stop(_spec(tmp_path))
    assert "Access denied" in e.value.message


def test_it_writes_the_unit_reloads_and_starts(tmp_path: Path) -> None:
    spec = EngineSpec(
        node="ascend-01", rank=0, role="head",
        argv=["vllm", "serve", "/models/Qwen3.5", "--port", "18001"],
        env={"HCCL_IF_IP": "127.0.1.1"}, workdir=str(tmp_path),
    )  # fmt: skip
    mono = int(time.monotonic() * 1e6)
    show = (
        f"MainPID=77\nActiveEnterTimestampMonotonic={mono}\n"
        "ExecMainStatus=0\nSubState=running\n"
    )
    state = {"active": "inactive"}

    def fake(argv: list[str], timeout: float) -> RunResult:
        if argv[:2] == ["systemctl", "start"]:
            state["active"] = "active"
        return _systemd_replies(state["active"], show)(argv, timeout)  # type: ignore[operator]

    drv = SystemdDriver(
        unit_dir=str(tmp_path / "units"),
        env_dir=str(tmp_path / "env"),
        executable="/opt/vllm/bin/vllm",
        start_check_s=0,
    )
    (tmp_path / "units").mkdir()
    with patch("engine.drivers.systemd._run", autospec=True) as run:
        run.side_effect = fake
        st = drv.start(spec)
    assert st.state == "running" and st.pid == 77
    argvs = [c.args[0] for c in run.call_args_list]
    reload_at = argvs.index(["systemctl", "daemon-reload"])
    start_at = argvs.index(["systemctl", "start", "vllm-ascend-01.service"])
    assert reload_at < start_at
    unit = (tmp_path / "units" / "vllm-ascend-01.service").read_text()
    assert (
        "EnvironmentFile=" in unit
        and str(tmp_path / "env" / "vllm-ascend-01.env") in unit
    )
    [exec_start] = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    assert shlex.split(exec_start.removeprefix("ExecStart=")) == [
        "/opt/vllm/bin/vllm", "serve", "/models/Qwen3.5", "--port", "18001",
    ]  # fmt: skip
    assert "HCCL_IF_IP" in (tmp_path / "env" / "vllm-ascend-01.env").read_text()
    # the env file may hold HF_TOKEN and the engine's API key: root only
    assert (tmp_path / "env" / "vllm-ascend-01.env").stat().st_mode & 0o777 == 0o600


def test_it_raises_with_the_journal_when_the_unit_dies_at_start(tmp_path: Path) -> None:
    show = "MainPID=0\nExecMainStatus=2\nSubState=failed\n"
    journal = "vllm serve: error: unrecognized arguments: --num-scheduler-steps 8\n"
    drv = SystemdDriver(unit_dir=str(tmp_path), env_dir=str(tmp_path), start_check_s=0)
    with (
        patch("engine.drivers.systemd._run", autospec=True) as run,
        patch.object(systemd_mod.SystemdDriver, "install", autospec=True),
    ):
        run.side_effect = _systemd_replies("failed", show, journal)
        with pytest.raises(DriverError) as e:
            drv.start(_spec(tmp_path))
    assert "unrecognized arguments" in e.value.message and e.value.permanent


def test_it_turns_a_missing_systemctl_into_a_permanent_error() -> None:
    with pytest.raises(DriverError) as e:
        systemd_mod._run(["/nonexistent/systemctl", "is-active", "x"], timeout=5)
    assert e.value.permanent and "process driver" in e.value.message


def test_it_starts_and_stops_the_simulator_through_the_sim_driver(
    tmp_path: Path,
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = EngineSpec(
        node="ascend-01",
        rank=0,
        role="head",
        argv=["vllm", "serve", "/models/Qwen3.5", "--host", "127.0.0.1",
              "--port", str(port), "--served-model-name", "qwen3.5"],
        env={"SIM_STATE_DIR": str(tmp_path / "state")},
        workdir=str(tmp_path / "agent"),
    )  # fmt: skip
    drv = SimDriver(start_check_s=0.5)
    try:
        st = drv.start(spec)
        assert st.state == "running"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(
                "sim engine never listened:\n" + "\n".join(drv.logs(spec))
            )
        engine = psutil.Process(drv.status(spec).pid or 0)
        assert "engine.sim.vllm" in " ".join(engine.cmdline())
    finally:
        st = drv.stop(spec, grace_s=10)
    assert st.state == "stopped"
    assert not _alive(engine.pid)
