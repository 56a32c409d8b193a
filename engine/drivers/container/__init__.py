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

``argv`` holds what a rank's container is (the ``docker run`` argv above, the systemd
unit that runs it, the plan's env); ``driver`` drives the engine's CLI (``ContainerDriver``:
start, stop, status, logs and its preflight checks; ``node_preflight``).
"""

from engine.drivers.container.argv import (
    CLUSTER_KEY,
    DEVICES_KEY,
    DRIVER_KEYS,
    ENGINES,
    FIXED_DEVICES,
    HOST_MOUNTS,
    IMAGE_KEY,
    SHM_SIZE,
    container_env,
    container_name,
    npu_indices,
    render_container_unit,
    run_argv,
)
from engine.drivers.container.driver import (
    INSPECT_STATE,
    NAME_FILE,
    VERSION_LABEL,
    ContainerDriver,
    node_preflight,
)

__all__ = [
    "CLUSTER_KEY",
    "DEVICES_KEY",
    "DRIVER_KEYS",
    "ENGINES",
    "FIXED_DEVICES",
    "HOST_MOUNTS",
    "IMAGE_KEY",
    "INSPECT_STATE",
    "NAME_FILE",
    "SHM_SIZE",
    "VERSION_LABEL",
    "ContainerDriver",
    "container_env",
    "container_name",
    "node_preflight",
    "npu_indices",
    "render_container_unit",
    "run_argv",
]
