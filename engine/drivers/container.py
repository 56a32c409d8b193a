"""Container driver: each rank's ``vllm serve`` runs in vllm-ascend's image via docker or podman.

Supported engines: ``docker`` and ``podman`` (their ``run``/``stop``/``rm``/``inspect``/
``logs``/``ps``/``image inspect`` share the grammar used here). openEuler's iSula is
not supported: its ``isula run`` differs (no ``--shm-size`` unit suffixes, its own
``inspect`` format); a site on iSula uses the systemd driver with a venv.

The ``docker run`` argv follows vllm-ascend's own example for A2/A3 servers
(``docs/source/installation.md`` "Set up using Docker", A2/A3 tab, and
``docs/source/quick_start.md``, vllm-project/vllm-ascend @182b75ea84ff), item by item:

- ``--net=host`` — rendered as ``--network=host``, the spelling ``docker run --help``
  lists (``--net`` is its hidden alias); HCCL and the DP RPC need the host's network.
- ``--shm-size=1g`` — the documented size.
- ``--device /dev/davinciN`` for each NPU this rank uses (the plan's
  ``ASCEND_RT_VISIBLE_DEVICES``), then ``/dev/davinci_manager``, ``/dev/devmm_svm``,
  ``/dev/hisi_hdc``.
- mounts ``/usr/local/dcmi``, ``/usr/local/Ascend/driver/tools/hccn_tool``,
  ``/usr/local/bin/npu-smi``, ``/usr/local/Ascend/driver/lib64/``,
  ``/usr/local/Ascend/driver/version.info``, ``/etc/ascend_install.info``; plus
  ``/etc/hccn.conf`` as ``docs/source/tutorials/features/pd_colocated_mooncake_multi_instance.md``
  mounts it ("Mount the hccn.conf file from the host node into the container") —
  without it the service starts and answers wrongly (vllm-ascend issues 2698, 6063, 7711).
  The host files are mounted read-only (``:ro``); the docs mount them read-write.
- the model directory read-only at the same path (the docs mount ``/root/.cache``).

Labels ``ascend.cluster``/``ascend.node``/``ascend.rank``/``ascend.role`` name the rank;
the container is named ``vllm-<cluster>-r<rank>``. Two names of the plan's environment
are the driver's, not the engine's, and are not passed in: ``VLLM_ASCEND_IMAGE`` (the
image the console chose from the release matrix) and ``VLLM_ASCEND_CLUSTER``.
"""

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
from engine.render import systemd_quote

ENGINES = ("docker", "podman")
FIXED_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
HOST_MOUNTS = (
    "/usr/local/dcmi",
    "/usr/local/Ascend/driver/tools/hccn_tool",
    "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64/",
    "/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info",
    "/etc/hccn.conf",
)
SHM_SIZE = "1g"
NAME_FILE = "container-name"  # in the agent's workdir: the running rank's container
DEVICES_KEY = "ASCEND_RT_VISIBLE_DEVICES"  # set by the plan (engine/plans/argv.py)
IMAGE_KEY, CLUSTER_KEY = "VLLM_ASCEND_IMAGE", "VLLM_ASCEND_CLUSTER"
DRIVER_KEYS = (IMAGE_KEY, CLUSTER_KEY)
# docker/metadata-action (vllm-ascend .github/workflows/_schedule_image_build.yaml)
# sets the OCI version label from the tag, e.g. "v0.23.0"
VERSION_LABEL = "org.opencontainers.image.version"
INSPECT_STATE = "{{json .State}}"


def container_name(cluster: str, rank: int) -> str:
    return f"vllm-{cluster or 'engine'}-r{rank}"


def npu_indices(env: dict[str, str]) -> list[int]:
    """The NPUs the plan gives this rank (``ASCEND_RT_VISIBLE_DEVICES``), else 0–7."""
    raw = env.get(DEVICES_KEY, "")
    try:
        found = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise DriverError(
            f"ASCEND_RT_VISIBLE_DEVICES={raw!r} is not a list of NPU numbers",
            permanent=True,
        ) from None
    return found or list(range(8))


def run_argv(
    spec: EngineSpec,
    *,
    engine: str = "docker",
    image: str = "",
    detach: bool = True,
    shm_size: str = SHM_SIZE,
) -> list[str]:
    """The ``docker run`` (or ``podman run``) argv for one rank of the plan.

    ``detach=False`` keeps it in the foreground with ``--rm`` (the systemd unit's form).
    Raises DriverError for an unknown engine, no image, or an argv that is not
    ``vllm serve <model> …``.
    """
    if engine not in ENGINES:
        raise DriverError(
            f"container engine {engine!r} is not supported; use one of: {', '.join(ENGINES)}",
            permanent=True,
        )
    image = image or spec.env.get(IMAGE_KEY, "")
    if not image:
        raise DriverError(
            f"no image for {spec.node}: the plan sets {IMAGE_KEY} from the release matrix",
            permanent=True,
        )
    argv = list(spec.argv)
    if len(argv) < 3 or os.path.basename(argv[0]) != "vllm" or argv[1] != "serve":
        raise DriverError(
            f"{spec.node}: argv must be 'vllm serve <model> …', got {argv[:3]!r}",
            permanent=True,
        )
    cluster = spec.env.get(CLUSTER_KEY, "")
    out = [engine, "run", "--detach" if detach else "--rm"]
    out += ["--name", container_name(cluster, spec.rank)]
    for key, value in (
        ("cluster", cluster),
        ("node", spec.node),
        ("rank", str(spec.rank)),
        ("role", spec.role),
    ):
        out += ["--label", f"ascend.{key}={value}"]
    out += ["--network=host", f"--shm-size={shm_size}"]
    if detach:
        # the console restarts ranks in order; the engine must not restart one alone
        out += ["--restart=no"]
    for i in npu_indices(spec.env):
        out += ["--device", f"/dev/davinci{i}"]
    for dev in FIXED_DEVICES:
        out += ["--device", dev]
    for path in HOST_MOUNTS:
        out += ["--volume", f"{path}:{path}:ro"]
    model = argv[2]
    if model.startswith("/"):
        out += ["--volume", f"{model}:{model}:ro"]
    for key, value in spec.env.items():
        if key not in DRIVER_KEYS:
            out += ["--env", f"{key}={value}"]
    return [*out, image, *argv]


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
        checks: list[dict[str, Any]] = []
        try:
            code, out, err = self._cli("version", "--format", "{{.Server.Version}}")
        except DriverError as exc:
            code, out, err = 127, "", exc.message
        if code != 0:
            return [
                checktext.check(
                    "container_engine.down",
                    "fail",
                    problem=(err or out).strip()[:300],
                    engine=self.engine,
                )
            ]
        checks.append(
            checktext.check(
                "container_engine.ok", "pass", engine=self.engine, version=out.strip()
            )
        )
        image = os.environ.get("CONTAINER_IMAGE") or spec.env.get(IMAGE_KEY, "")
        code, out, err = self._cli(
            "image", "inspect", "--format", "{{json .Config.Labels}}", image
        )
        if code != 0:
            checks.append(
                checktext.check(
                    "container_image.missing",
                    "fail",
                    image=image,
                    problem=(err or out).strip()[:200],
                    engine=self.engine,
                )
            )
        else:
            labels = json.loads(out.strip() or "null") or {}
            have = str(labels.get(VERSION_LABEL, "")).lstrip("v")
            want = expected_version.lstrip("v")
            ok = bool(want) and have == want
            outcome = "ok" if ok else "wrong" if have else "unlabelled"
            checks.append(
                checktext.check(
                    f"container_image.{outcome}",
                    "pass" if ok else "fail",
                    image=image,
                    label=VERSION_LABEL,
                    have=have,
                    want=want,
                )
            )
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
        checks.append(
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
        return checks


def container_env(
    env: dict[str, str], *, cluster: str, vllm_ascend_version: str, hardware: str
) -> dict[str, str]:
    """The plan's env of a container rank: the image of the release matrix for this
    hardware (``a2``/``a3``) and the cluster name, for the driver (not passed in)."""

    return {
        **env,
        IMAGE_KEY: image(vllm_ascend_version, hardware),
        CLUSTER_KEY: cluster,
    }


def render_container_unit(
    spec: EngineSpec, *, engine: str = "docker", grace_s: int = 120
) -> str:
    """The systemd unit of a container rank: systemd runs ``docker run --rm`` in the
    foreground (one unit per rank as with the systemd driver) and stops it with
    ``docker stop --time`` (TERM: vLLM drains; KILL after the grace)."""

    name = container_name(spec.env.get(CLUSTER_KEY, ""), spec.rank)
    run = " ".join(
        systemd_quote(a) for a in run_argv(spec, engine=engine, detach=False)
    )
    return "\n".join(
        [
            f"# {spec.node} rank {spec.rank} ({spec.role}) in {spec.env.get(IMAGE_KEY, '')}",
            "[Unit]",
            f"Description=vLLM serve {spec.node} rank {spec.rank} ({spec.role}), {engine} container",
            f"Requires={engine}.service"
            if engine == "docker"
            else "Wants=network-online.target",
            "After=network-online.target"
            + (f" {engine}.service" if engine == "docker" else ""),
            "",
            "[Service]",
            "Type=simple",
            # a container left by a crash holds the name: remove it first ('-' = may fail)
            f"ExecStartPre=-/usr/bin/{engine} rm --force {name}",
            f"ExecStart=/usr/bin/{run}",
            f"ExecStop=/usr/bin/{engine} stop --time {int(grace_s)} {name}",
            "Restart=on-failure",
            "RestartSec=10",
            "TimeoutStartSec=1800",
            f"TimeoutStopSec={int(grace_s) + 30}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
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
