"""The container driver: the engine's CLI (argv lists, never a shell) starts, stops,
inspects and reads the logs of a rank's container, and checks the node before a start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from engine import checktext
from engine.compat import image, normalize, release
from engine.drivers.base import Driver, DriverError, EngineSpec, EngineStatus
from engine.drivers.container.argv import (
    CLUSTER_KEY,
    DEVICES_KEY,
    ENGINES,
    IMAGE_KEY,
    container_name,
    npu_indices,
    run_argv,
)

NAME_FILE = "container-name"  # in the agent's workdir: the running rank's container
# docker/metadata-action (vllm-ascend .github/workflows/_schedule_image_build.yaml)
# sets the OCI version label from the tag, e.g. "v0.23.0"
VERSION_LABEL = "org.opencontainers.image.version"
INSPECT_STATE = "{{json .State}}"


def _parse_state(text: str) -> dict[str, Any]:
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise DriverError(
            f"unrecognized container state {text[:200]!r}: {exc}"
        ) from exc
    if not isinstance(state, dict) or "Status" not in state:
        raise DriverError(f"unrecognized container state {text[:200]!r}")
    return state


class ContainerDriver(Driver):
    """Runs the rank in a container through the engine's CLI (argv lists, never a shell)."""

    name = "container"

    def __init__(
        self,
        engine: str | None = None,
        *,
        search_path: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.engine = engine or os.environ.get("CONTAINER_ENGINE", "docker")
        # the simulator points these at engine/sim/bin and the sim node's state
        self.search_path = search_path
        self.extra_env = dict(extra_env or {})
        if self.engine not in ENGINES:
            raise ValueError(
                f"CONTAINER_ENGINE={self.engine!r}; use one of: {', '.join(ENGINES)}"
            )

    def bench_command(self, argv: list[str]) -> list[str]:
        """vLLM lives in the image, not on the host, and where the image would write
        ``--result-dir`` is not a host path this driver knows: refused with the way round."""
        raise DriverError(
            "benchmarks on container nodes are not run by the agent yet: run "
            f"`{self.engine} exec <engine container> vllm bench serve … --save-result` "
            "and import the JSON (manage.py bench import FILE --cluster NAME)",
            permanent=True,
        )

    def _cli(self, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
        exe = shutil.which(self.engine, path=self.search_path)
        if exe is None:
            raise DriverError(
                f"{self.engine} is not installed on this node", permanent=True
            )
        try:
            r = subprocess.run(
                [exe, *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env={**os.environ, **self.extra_env} if self.extra_env else None,
            )
        except subprocess.TimeoutExpired:
            raise DriverError(
                f"{self.engine} {args[0]} did not answer within {timeout:.0f}s"
            ) from None
        return r.returncode, r.stdout, r.stderr

    def _name(self, spec: EngineSpec) -> str:
        """The rank's container name; the agent's stop/status/logs pass a bare spec
        (no env, rank 0), so the name given at start is kept in the workdir."""
        if CLUSTER_KEY in spec.env or not spec.workdir:
            return container_name(spec.env.get(CLUSTER_KEY, ""), spec.rank)
        try:
            saved = (Path(spec.workdir) / NAME_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            saved = ""
        return saved or container_name("", spec.rank)

    def command(self, spec: EngineSpec) -> list[str]:
        return run_argv(
            spec, engine=self.engine, image=os.environ.get("CONTAINER_IMAGE", "")
        )

    def start(self, spec: EngineSpec) -> EngineStatus:
        argv = self.command(spec)
        current = self.status(spec)
        if current.state == "running":
            raise DriverError(f"{self._name(spec)} is already running on {spec.node}")
        if current.state != "stopped":  # an exited container keeps its name: remove it
            self._cli("rm", "--force", self._name(spec))
        if spec.workdir:
            Path(spec.workdir).mkdir(parents=True, exist_ok=True)
            (Path(spec.workdir) / NAME_FILE).write_text(
                self._name(spec), encoding="utf-8"
            )
        code, out, err = self._cli(*argv[1:], timeout=600)
        if code != 0:
            raise DriverError(
                f"{self.engine} run failed ({code}): {(err or out).strip()[:500]}",
                permanent=code == 125,  # 125: the engine refused the command line
            )
        time.sleep(1.0)
        status = self.status(spec)
        if status.state == "exited":
            raise DriverError(
                f"{self._name(spec)} exited with {status.exit_code} at once: "
                + " | ".join(status.log_tail[-5:])
            )
        return status

    def stop(self, spec: EngineSpec, *, grace_s: float = 30.0) -> EngineStatus:
        """``stop --time`` sends TERM (vLLM drains), KILL after ``grace_s``; kept for its exit code."""
        if self.status(spec).state == "running":
            self._cli(
                "stop",
                "--time",
                str(int(grace_s)),
                self._name(spec),
                timeout=grace_s + 30,
            )
        status = self.status(spec)
        return (
            status
            if status.state != "running"
            else EngineStatus("unknown", detail="still running after stop")
        )

    def status(self, spec: EngineSpec) -> EngineStatus:
        code, out, err = self._cli(
            "inspect", "--format", INSPECT_STATE, self._name(spec)
        )
        if code != 0:
            if "no such" in (err + out).lower():
                return EngineStatus("stopped", detail="no container")
            return EngineStatus("unknown", detail=(err or out).strip()[:300])
        state = _parse_state(out.strip())
        if state["Status"] == "running":
            return EngineStatus(
                "running",
                pid=state.get("Pid") or None,
                detail=f"container {self._name(spec)}",
            )
        return EngineStatus(
            "exited",
            exit_code=state.get("ExitCode"),
            log_tail=self.logs(spec, 20),
            detail=f"container {self._name(spec)} {state['Status']}",
        )

    def logs(self, spec: EngineSpec, lines: int = 200) -> list[str]:
        code, out, err = self._cli("logs", "--tail", str(int(lines)), self._name(spec))
        if code != 0:
            return []
        return (out + err).splitlines()[-lines:]

    def preflight(
        self, spec: EngineSpec, expected_version: str
    ) -> list[dict[str, Any]]:
        """The engine answers; the image is present with the expected version label;
        no other container holds this rank's NPU devices."""
        answers, engine = self._engine_check()
        if not answers:
            return [engine]
        return [
            engine,
            self._image_check(spec, expected_version),
            self._devices_check(spec),
        ]

    def _engine_check(self) -> tuple[bool, dict[str, Any]]:
        """Whether the engine answers ``version``, and the check that says so."""
        try:
            code, out, err = self._cli("version", "--format", "{{.Server.Version}}")
        except DriverError as exc:
            code, out, err = 127, "", exc.message
        if code != 0:
            return False, checktext.check(
                "container_engine.down",
                "fail",
                problem=(err or out).strip()[:300],
                engine=self.engine,
            )
        return True, checktext.check(
            "container_engine.ok", "pass", engine=self.engine, version=out.strip()
        )

    def _image_check(self, spec: EngineSpec, expected_version: str) -> dict[str, Any]:
        """The image is present and its OCI version label is ``expected_version``."""
        image = os.environ.get("CONTAINER_IMAGE") or spec.env.get(IMAGE_KEY, "")
        code, out, err = self._cli(
            "image", "inspect", "--format", "{{json .Config.Labels}}", image
        )
        if code != 0:
            return checktext.check(
                "container_image.missing",
                "fail",
                image=image,
                problem=(err or out).strip()[:200],
                engine=self.engine,
            )
        labels = json.loads(out.strip() or "null") or {}
        have = str(labels.get(VERSION_LABEL, "")).lstrip("v")
        want = expected_version.lstrip("v")
        ok = bool(want) and have == want
        outcome = "ok" if ok else "wrong" if have else "unlabelled"
        return checktext.check(
            f"container_image.{outcome}",
            "pass" if ok else "fail",
            image=image,
            label=VERSION_LABEL,
            have=have,
            want=want,
        )

    def _devices_check(self, spec: EngineSpec) -> dict[str, Any]:
        """No running container but this rank's holds one of its NPU devices."""
        wanted = {f"/dev/davinci{i}" for i in npu_indices(spec.env)}
        mine = self._name(spec)
        holders = []
        code, out, _ = self._cli("ps", "--quiet", "--no-trunc")
        for cid in out.split() if code == 0 else []:
            c2, info, _ = self._cli(
                "inspect", "--format", "{{.Name}} {{json .HostConfig.Devices}}", cid
            )
            if c2 != 0:
                continue
            cname, _, devs = info.strip().partition(" ")
            held = {d.get("PathOnHost") for d in json.loads(devs or "null") or []}
            if cname.lstrip("/") != mine and held & wanted:
                holders.append(
                    f"{cname.lstrip('/')} holds {', '.join(sorted(held & wanted))}"
                )
        return (
            checktext.check(
                "npu_devices_free.busy",
                "fail",
                holders="; ".join(holders),
                engine=self.engine,
            )
            if holders
            else checktext.check(
                "npu_devices_free.ok", "pass", devices=", ".join(sorted(wanted))
            )
        )


def node_preflight(
    node: str, expected_npus: int, target_version: str, hardware: str
) -> list[dict[str, Any]]:
    """The container checks of a node's preflight (ENGINE_DRIVER=container): the engine
    answers, the image of ``target_version`` for ``hardware`` is present with its
    version label (or CONTAINER_IMAGE), no other container holds the node's NPUs."""

    if not target_version or release(target_version) is None:
        return [
            checktext.check(
                "container_image.no_release",
                "fail",
                version=target_version or "(none)",
            )
        ]
    spec = EngineSpec(
        node=node,
        rank=-1,
        role="",
        argv=[],
        env={
            DEVICES_KEY: ",".join(str(i) for i in range(expected_npus)),
            IMAGE_KEY: image(target_version, hardware),
        },
        workdir="",
    )
    return ContainerDriver().preflight(spec, normalize(target_version))
