"""Node-side preflight checks (vllm-ascend "verify multi-node communication" and more).

Each check returns pass / warn / fail with the evidence and a fix hint. The control
side runs this on every node in parallel and compares versions across nodes.

The checks are grouped by subject: ``npus`` (npu-smi), ``nics`` (hccn_tool),
``model`` (the model directory) and ``host`` (versions, server model, ports);
``check`` holds the ``Check`` they all return. ``run_preflight`` runs them all.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from engine import compat
from engine.capabilities import capability
from engine.drivers.container import node_preflight
from engine.preflight.check import FAIL, PASS, WARN, Check
from engine.preflight.host import (
    CANN_VERSION_FILES,
    DMI_PRODUCT_NAME,
    check_ports,
    check_server_model,
    versions,
)
from engine.preflight.model import (
    DEFAULT_MODELS_ROOT,
    check_model,
    models_root,
    outside_models_root,
)
from engine.preflight.nics import HCCN_CONF, NIC_QUERIES, check_nics
from engine.preflight.npus import HBM_BUSY_PCT, check_npus

__all__ = [
    "CANN_VERSION_FILES",
    "DEFAULT_MODELS_ROOT",
    "DMI_PRODUCT_NAME",
    "FAIL",
    "HBM_BUSY_PCT",
    "HCCN_CONF",
    "NIC_QUERIES",
    "PASS",
    "WARN",
    "Check",
    "check_model",
    "check_nics",
    "check_npus",
    "check_ports",
    "check_server_model",
    "models_root",
    "outside_models_root",
    "run_preflight",
    "versions",
]


def run_preflight(
    *,
    expected_npus: int,
    host_ip: str,
    ports: list[int],
    model_path: str,
    ping_targets: list[str],
    vllm_ascend_version: str = "",
) -> dict[str, Any]:
    """All node-side checks. Returns {"checks": [...], "server_model": {...}, "versions": {...},
    "npu_ips": [...], "model_size": int|None}; server_model is ServerModelDetection.to_dict()."""
    checks, info = check_npus(expected_npus)
    npus = len({c.npu for c in info.chips}) if info else expected_npus
    nic_checks, ips = check_nics(npus, ping_targets)
    model_check, size, manifest = check_model(model_path)
    server_check, server = check_server_model()
    checks += nic_checks + [model_check, check_ports(host_ip, ports), server_check]
    found = versions()
    extra = [compat.check(found, vllm_ascend_version)]
    if os.environ.get("ENGINE_DRIVER") == "container":
        family = capability(server.model).family
        extra += node_preflight(
            socket.gethostname(),
            expected_npus,
            vllm_ascend_version or str(found.get("vllm_ascend") or ""),
            "a3" if family == "A3" else "a2",
        )
    return {
        "checks": [c.to_dict() for c in checks] + extra,
        "server_model": server.to_dict(),
        "versions": found,
        "npu_ips": ips,
        "model_size": size,
        "weights": manifest,
    }
