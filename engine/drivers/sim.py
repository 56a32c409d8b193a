"""Sim driver: the process driver with the simulator's binaries swapped in.

The argv a real node would get is kept; only its leading ``vllm serve`` becomes
``python -m engine.sim.vllm serve``, and PATH puts ``engine/sim/bin`` (the sim
``npu-smi`` / ``hccn_tool``) first. Everything else is ProcessDriver's code path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.drivers.base import DriverError, EngineSpec, EngineStatus
from engine.drivers.container import IMAGE_KEY, NAME_FILE, ContainerDriver
from engine.drivers.process import ProcessDriver

REPO_ROOT = Path(__file__).resolve().parents[2]
SIM_BIN = REPO_ROOT / "engine" / "sim" / "bin"


class SimDriver(ProcessDriver):
    """Starts ``engine.sim.vllm`` with the argv a real node's ``vllm serve`` gets.

    A rank whose plan names an image (the inventory's driver is ``container``) runs
    through the container driver against the simulator's docker/podman CLI instead.
    """

    name = "sim"

    def _container(self, spec: EngineSpec) -> ContainerDriver | None:
        marker = Path(spec.workdir) / NAME_FILE if spec.workdir else None
        if IMAGE_KEY not in spec.env and not (marker and marker.exists()):
            return None
        state_dir = spec.env.get("SIM_STATE_DIR") or os.environ.get(
            "SIM_STATE_DIR", "var/sim"
        )
        return ContainerDriver(
            search_path=str(SIM_BIN),
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
            p for p in (str(SIM_BIN), env.get("PATH", "")) if p
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
