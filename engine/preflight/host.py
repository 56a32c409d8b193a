"""The node itself: its software versions, its server model (which decides the
remedy for a link fault) and whether the engine's ports are free."""

from __future__ import annotations

import errno
import importlib.metadata
import socket
from pathlib import Path

from engine.capabilities import UNKNOWN_MODEL, capability
from engine.drivers import node_driver
from engine.parsers import ParseError
from engine.parsers.npu_smi_kv import parse_board
from engine.parsers.server_model import (
    ServerModelDetection,
    detect_server_model,
    parse_dmi_product_name,
)
from engine.preflight.check import FAIL, PASS, WARN, Check, _tool

CANN_VERSION_FILES = (
    "/usr/local/Ascend/ascend-toolkit/latest/version.cfg",
    "/usr/local/Ascend/cann/latest/version.cfg",
)
# The kernel's copy of the SMBIOS product name: readable without root, unlike dmidecode.
DMI_PRODUCT_NAME = Path("/sys/class/dmi/id/product_name")


def versions() -> dict[str, str | None]:
    """Driver, firmware, CANN and the Python packages this agent can import."""
    known = node_driver().versions()
    if known is not None:
        return known
    found: dict[str, str | None] = {"driver": None, "firmware": None, "cann": None}
    out, _ = _tool(["npu-smi", "info", "-t", "board", "-i", "0"])
    if out:
        try:
            board = parse_board(out)
            found["driver"], found["firmware"] = (
                board.software_version,
                board.firmware_version,
            )
        except ParseError:
            pass
    for path in CANN_VERSION_FILES:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith("version="):
                    found["cann"] = line.split("=", 1)[1].strip()
        except OSError:
            continue
    for dist, key in (
        ("vllm", "vllm"),
        ("vllm-ascend", "vllm_ascend"),
        ("torch-npu", "torch_npu"),
    ):
        try:
            found[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[key] = None
    return found


def check_ports(host: str, ports: list[int]) -> Check:
    busy = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # SO_REUSEADDR as the engine's own server sets it: a port in TIME_WAIT after a
            # stop is free for vLLM; only a live listener makes the bind fail.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as exc:
                busy.append(
                    f"{host}:{port} ({'in use' if exc.errno == errno.EADDRINUSE else exc.strerror})"
                )
    if busy:
        return Check.of("ports_free.busy", FAIL, ports=", ".join(busy))
    return Check.of(
        "ports_free.ok", PASS, ports=", ".join(f"{host}:{p}" for p in ports)
    )


def check_server_model() -> tuple[Check, ServerModelDetection]:
    """The server model from SMBIOS (dmidecode, else sysfs) checked against npu-smi's chip.

    The remedy for an HCCS link fault depends on it (engine/capabilities/servers.py); unknown
    is a warning, not a failure: the site can set the model with a reason.
    """
    source = "dmidecode -s system-product-name"
    out, problem = _tool(["dmidecode", "-s", "system-product-name"])
    if out is None:
        try:
            out, source = (
                DMI_PRODUCT_NAME.read_text(encoding="utf-8"),
                str(DMI_PRODUCT_NAME),
            )
        except OSError as exc:
            source = f"dmidecode ({problem}) and {DMI_PRODUCT_NAME} ({exc.strerror})"
    product = parse_dmi_product_name(out) if out else None
    chip_name = None
    board, _ = _tool(["npu-smi", "info", "-t", "board", "-i", "0", "-c", "0"])
    if board:
        try:
            chip_name = parse_board(board).chip_name
        except ParseError:
            chip_name = None
    found = detect_server_model(product, chip_name)
    label = capability(found.model).label
    if found.model == UNKNOWN_MODEL:
        return (
            Check.of(
                "server_model.unknown",
                WARN,
                label=label,
                evidence=found.evidence_item or found.evidence,
                source=source,
            ),
            found,
        )
    return (
        Check.of(
            "server_model.ok",
            PASS,
            label=label,
            evidence=found.evidence_item or found.evidence,
            source=source,
        ),
        found,
    )
