"""What a rank's container is: the ``docker run`` argv (item by item as the package
docstring cites it), the systemd unit that runs it in the foreground, and the plan's env."""

from __future__ import annotations

import os

from engine.compat import image
from engine.drivers.base import DriverError, EngineSpec
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
DEVICES_KEY = "ASCEND_RT_VISIBLE_DEVICES"  # set by the plan (engine/plans/argv.py)
IMAGE_KEY, CLUSTER_KEY = "VLLM_ASCEND_IMAGE", "VLLM_ASCEND_CLUSTER"
DRIVER_KEYS = (IMAGE_KEY, CLUSTER_KEY)


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
