"""Sim driver: the process driver with the simulator's binaries swapped in.

The argv a real node would get is kept; only its leading ``vllm serve`` becomes
``python -m engine.sim.vllm serve``, and PATH puts ``engine/sim/bin`` (the sim
``npu-smi`` / ``hccn_tool``) first. Everything else is ProcessDriver's code path.

It is also the one place the rest of engine/ meets the simulator: the node hooks of
``engine.drivers.base.Driver`` (tools answered in-process, simulated versions and
faults) are answered here from engine/sim's state.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.drivers.base import DriverError, EngineSpec, EngineStatus
from engine.drivers.container import IMAGE_KEY, NAME_FILE, ContainerDriver
from engine.drivers.process import ProcessDriver
from engine.sim import BIN_DIR, dmidecode, hccn_tool, npu_smi
from engine.sim.models import node_model_dir
from engine.sim.plog import crash_traces
from engine.sim.state import (
    clear_faults,
    inject_fault,
    load_config,
    load_faults,
    node_dir,
    read_engine,
    save_config,
)
from engine.tools import ToolResult

REPO_ROOT = Path(__file__).resolve().parents[2]


class SimDriver(ProcessDriver):
    """Starts ``engine.sim.vllm`` with the argv a real node's ``vllm serve`` gets.

    A rank whose plan names an image (the inventory's driver is ``container``) runs
    through the container driver against the simulator's docker/podman CLI instead.
    """

    name = "sim"
    tool_dirs = (str(BIN_DIR),)
    engine_dies_with_agent = True  # make run's Ctrl-C leaves no orphan engine

    def _container(self, spec: EngineSpec) -> ContainerDriver | None:
        marker = Path(spec.workdir) / NAME_FILE if spec.workdir else None
        if IMAGE_KEY not in spec.env and not (marker and marker.exists()):
            return None
        state_dir = spec.env.get("SIM_STATE_DIR") or os.environ.get(
            "SIM_STATE_DIR", "var/sim"
        )
        return ContainerDriver(
            search_path=str(BIN_DIR),
            extra_env={
                "SIM_STATE_DIR": str(Path(state_dir).resolve()),
                "SIM_NODE": spec.node,
                "SIM_PYTHON": sys.executable,
            },
        )

    def start(self, spec: EngineSpec) -> EngineStatus:
        if IMAGE_KEY not in spec.env and spec.workdir:
            (Path(spec.workdir) / NAME_FILE).unlink(missing_ok=True)
        box = self._container(spec)
        return box.start(spec) if box else super().start(spec)

    def stop(self, spec: EngineSpec, *, grace_s: float = 30.0) -> EngineStatus:
        box = self._container(spec)
        return (
            box.stop(spec, grace_s=grace_s)
            if box
            else super().stop(spec, grace_s=grace_s)
        )

    def status(self, spec: EngineSpec) -> EngineStatus:
        box = self._container(spec)
        return box.status(spec) if box else super().status(spec)

    def logs(self, spec: EngineSpec, lines: int = 200) -> list[str]:
        box = self._container(spec)
        return box.logs(spec, lines) if box else super().logs(spec, lines)

    def command(self, spec: EngineSpec) -> tuple[list[str], dict[str, str]]:
        argv, env = super().command(spec)
        if len(argv) < 2 or os.path.basename(argv[0]) != "vllm" or argv[1] != "serve":
            raise DriverError(
                f"sim engine on {spec.node}: argv must start with 'vllm serve', "
                f"got {argv[:2]!r}",
                permanent=True,
            )
        argv = [sys.executable, "-m", "engine.sim.vllm", "serve", *argv[2:]]
        env["PATH"] = os.pathsep.join(
            p for p in (str(BIN_DIR), env.get("PATH", "")) if p
        )
        env["SIM_NODE"] = spec.node
        state_dir = spec.env.get("SIM_STATE_DIR") or os.environ.get("SIM_STATE_DIR")
        if state_dir:
            env["SIM_STATE_DIR"] = state_dir
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        env["SIM_PYTHON"] = sys.executable
        return argv, env

    # -- the simulated node -----------------------------------------------------------

    def bench_command(self, argv: list[str]) -> list[str]:
        """The simulator's ``vllm bench serve`` (engine/sim/vllm/bench.py)."""
        return [sys.executable, "-m", "engine.sim.vllm", *argv[1:]]

    def workdir(self, node: str, environ: Mapping[str, str]) -> Path:
        base = Path(environ.get("SIM_STATE_DIR") or "var/sim")
        return Path(environ.get("AGENT_WORKDIR") or base / node / "agent")

    def prepare_node(self, node: str, workdir: Path) -> None:
        """The fake npu-smi/hccn_tool first on PATH, the node's state dir and hccn.conf ready."""
        os.environ["SIM_NODE"] = node
        os.environ.setdefault("SIM_STATE_DIR", str(workdir.parent.parent))
        os.environ["SIM_PYTHON"] = sys.executable
        os.environ["PATH"] = f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
        d = node_dir(node)
        cfg = load_config(d)
        ips = [ip for ip in os.environ.get("SIM_NPU_IPS", "").split(",") if ip]
        if ips:
            cfg.npu_ips = ips
            cfg.npu_count = len(ips)
        save_config(d, cfg)
        conf = d / "hccn.conf"
        if cfg.npu_ips and not conf.exists():
            lines = [
                f"address_{i}={ip}\nnetmask_{i}=255.255.255.0\nnetdetect_{i}={ip.rsplit('.', 1)[0]}.254\n"
                for i, ip in enumerate(cfg.npu_ips)
            ]
            conf.write_text("".join(lines))

    def answers(self, node: str) -> bool:
        return not load_faults(node_dir(node)).agent_stop

    def run_tool(self, argv: list[str]) -> ToolResult | None:
        """In-process by default: each fake tool is a Python program costing ~100 ms to
        start, and a poll round makes dozens of calls per node, which would drown a
        2-core demo machine. ``SIM_TOOLS_EXEC=1`` runs the executables in engine/sim/bin
        as real subprocesses instead (the test suite does this once)."""
        if os.environ.get("SIM_TOOLS_EXEC") == "1":
            return None
        d = node_dir()
        if argv[0] == "dmidecode":
            code, out, err = dmidecode.run(argv[1:], d)
            return ToolResult(argv=argv, returncode=code, stdout=out, stderr=err)
        if argv[0] == "npu-smi":
            code, out = npu_smi.run(argv[1:], d)
            return ToolResult(argv=argv, returncode=code, stdout=out, stderr="")
        code, out, err = hccn_tool.run(argv[1:], d)
        return ToolResult(argv=argv, returncode=code, stdout=out, stderr=err)

    def versions(self) -> dict[str, str | None]:
        return dict(load_config(node_dir()).versions.items())

    def hccn_conf(self) -> Path:
        return node_dir() / "hccn.conf"

    def model_dir(self, path: str, node: str | None = None) -> Path:
        # each sim node carries its own copy of a tiny real HF-format model directory
        return node_model_dir(path, node)

    def home_dir(self, node: str) -> Path:
        return node_dir(node)  # the sim node's stand-in for $HOME

    def leave_crash_traces(self, node: str, log: Path, pid: int) -> None:
        # its plog and the EE9999 block on stderr, as a rank dying of a device fault does
        crash_traces(node_dir(node), log, pid=pid)

    def fault_inject(self, node: str, fault: str, value: str | None) -> dict[str, Any]:
        faults = inject_fault(node_dir(node), fault, value)
        return {"faults": faults.to_dict(), "active": faults.active()}

    def fault_clear(self, node: str) -> dict[str, Any]:
        d = node_dir(node)
        clear_faults(d)
        return {"faults": load_faults(d).to_dict()}

    def sim_state(self, node: str) -> dict[str, Any]:
        d = node_dir(node)
        faults = load_faults(d)
        return {
            "config": load_config(d).to_dict(),
            "faults": faults.to_dict(),
            "active": faults.active(),
            "engine": read_engine(d),
        }
