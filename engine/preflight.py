"""Node-side preflight checks (vllm-ascend "verify multi-node communication" and more).

Each check returns pass / warn / fail with the evidence and a fix hint. The control
side runs this on every node in parallel and compares versions across nodes.
"""

from __future__ import annotations

import errno
import importlib.metadata
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import compat, weights
from engine.capabilities import UNKNOWN_MODEL, capability
from engine.checktext import check as check_text
from engine.checktext import item, join
from engine.drivers import node_driver
from engine.drivers.container import node_preflight
from engine.parsers import ParseError
from engine.parsers.hccn_tool import (
    parse_gateway,
    parse_ip,
    parse_link,
    parse_lldp,
    parse_net_health,
    parse_netdetect,
    parse_ping,
)
from engine.parsers.npu_smi import NpuSmiInfo, parse_info
from engine.parsers.npu_smi_kv import parse_board
from engine.parsers.server_model import (
    ServerModelDetection,
    detect_server_model,
    parse_dmi_product_name,
)
from engine.tools import ToolError, run_tool

PASS, WARN, FAIL = "pass", "warn", "fail"
HCCN_CONF = "/etc/hccn.conf"
CANN_VERSION_FILES = (
    "/usr/local/Ascend/ascend-toolkit/latest/version.cfg",
    "/usr/local/Ascend/cann/latest/version.cfg",
)
# The kernel's copy of the SMBIOS product name: readable without root, unlike dmidecode.
DMI_PRODUCT_NAME = Path("/sys/class/dmi/id/product_name")
# HBM already in use on an idle chip above this share means another process holds the NPU.
HBM_BUSY_PCT = 15.0


@dataclass
class Check:
    """One preflight finding."""

    name: str
    status: str
    evidence: str
    fix: str = ""
    id: str = (
        ""  # engine/checktext.py: the console renders the reader's language from it
    )
    params: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Any] = field(default_factory=dict)  # params made of items

    @classmethod
    def of(cls, cid: str, status: str, **params: Any) -> Check:
        """The check ``cid`` of engine/checktext.py, its English filled with ``params``."""
        return cls(**check_text(cid, status, **params))

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        if not out["parts"]:
            del out["parts"]
        return out


def _tool(argv: list[str]) -> tuple[str | None, str]:
    """Run a tool; return (stdout, problem)."""
    try:
        result = run_tool(argv, timeout=15)
    except ToolError as exc:
        return None, str(exc)
    if not result.ok:
        return (
            None,
            f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[:200]}",
        )
    return result.stdout, ""


def check_npus(expected: int) -> tuple[list[Check], NpuSmiInfo | None]:
    out, problem = _tool(["npu-smi", "info"])
    if out is None:
        return [Check.of("npu_smi.unavailable", FAIL, problem=problem)], None
    try:
        info = parse_info(out)
    except ParseError as exc:
        return [Check.of("npu_smi.unparsed", FAIL, problem=str(exc))], None
    checks = []
    bad = [
        f"NPU {c.npu} chip {c.chip}: {c.health}" for c in info.chips if c.health != "OK"
    ]
    warn_only = all(c.health == "Warning" for c in info.chips if c.health != "OK")
    if not bad:
        checks.append(Check.of("npu_health.ok", PASS, count=len(info.chips)))
    else:
        checks.append(
            Check.of(
                "npu_health.bad", WARN if warn_only else FAIL, problems="; ".join(bad)
            )
        )
    npus = len({c.npu for c in info.chips})
    if npus == expected:
        checks.append(Check.of("npu_count.ok", PASS, count=npus))
    else:
        checks.append(Check.of("npu_count.bad", FAIL, count=npus, expected=expected))
    busy = [
        f"NPU {c.npu}: {c.hbm_used_mb}/{c.hbm_total_mb} MB"
        for c in info.chips
        if c.hbm_used_mb is not None
        and c.hbm_total_mb
        and 100.0 * c.hbm_used_mb / c.hbm_total_mb > HBM_BUSY_PCT
    ]
    if busy:
        pids = sorted({p.pid for p in info.processes})
        checks.append(
            Check.of("hbm_free.busy_pids", FAIL, busy="; ".join(busy), pids=pids)
            if pids
            else Check.of("hbm_free.busy", FAIL, busy="; ".join(busy))
        )
    else:
        checks.append(Check.of("hbm_free.ok", PASS))
    return checks, info


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


def check_nics(
    npus: int, ping_targets: list[str]
) -> tuple[list[Check], list[str | None]]:
    """hccn_tool link / net_health / lldp / netdetect / gateway per NPU NIC, IPs, and pings."""
    checks: list[Check] = []
    ips: list[str | None] = []
    failures: dict[str, list[str]] = {
        "link": [],
        "net_health": [],
        "lldp": [],
        "netdetect": [],
        "gateway": [],
    }
    for i in range(npus):
        for key, cmd, parser, good in (
            ("link", "-link", parse_link, "UP"),
            ("net_health", "-net_health", parse_net_health, "Success"),
            ("lldp", "-lldp", parse_lldp, None),
            ("netdetect", "-netdetect", parse_netdetect, None),
            ("gateway", "-gateway", parse_gateway, None),
        ):
            out, problem = _tool(["hccn_tool", "-i", str(i), cmd, "-g"])
            if out is None:
                failures[key].append(f"NPU {i}: {problem}")
                continue
            try:
                value: Any = parser(out)
            except ParseError as exc:
                failures[key].append(f"NPU {i}: {exc}")
                continue
            if good is not None and str(value).lower() != good.lower():
                failures[key].append(f"NPU {i}: {value}")
        out, problem = _tool(["hccn_tool", "-i", str(i), "-ip", "-g"])
        try:
            ips.append(parse_ip(out).ipaddr if out else None)
        except ParseError:
            ips.append(None)
    for key, problems in failures.items():  # fixes per key: engine/checktext.py
        if problems:
            checks.append(
                Check.of(f"hccn_{key}.bad", FAIL, problems="; ".join(problems[:8]))
            )
        else:
            checks.append(Check.of(f"hccn_{key}.ok", PASS, count=npus))
    conf = _hccn_conf_path()
    if conf.exists():
        checks.append(Check.of("hccn_conf.ok", PASS, path=conf))
    else:
        checks.append(Check.of("hccn_conf.missing", FAIL, path=conf))
    missing_ips = [str(i) for i, ip in enumerate(ips) if not ip]
    checks.append(
        Check.of("npu_ips.missing", FAIL, npus=", ".join(missing_ips))
        if missing_ips
        else Check.of("npu_ips.ok", PASS, ips=", ".join(ip or "" for ip in ips))
    )
    lost = []
    for target in ping_targets:
        out, problem = _tool(["hccn_tool", "-i", "0", "-ping", "-g", "address", target])
        if out is None:
            lost.append(item("item.target_problem", target=target, problem=problem))
            continue
        try:
            result = parse_ping(out)
        except ParseError as exc:
            lost.append(item("item.target_problem", target=target, problem=str(exc)))
            continue
        if result.received == 0:
            lost.append(item("item.ping_lost", target=target, sent=result.sent))
    if ping_targets:
        checks.append(
            Check.of("npu_ping.lost", FAIL, problems=join(lost))
            if lost
            else Check.of("npu_ping.ok", PASS, count=len(ping_targets))
        )
    return checks, ips


def _hccn_conf_path() -> Path:
    return node_driver().hccn_conf() or Path(HCCN_CONF)


DEFAULT_MODELS_ROOT = "/data/models"


def models_root() -> str:
    """The directory every model must sit under (AGENT_MODELS_ROOT), resolved."""
    return os.path.realpath(os.environ.get("AGENT_MODELS_ROOT") or DEFAULT_MODELS_ROOT)


def outside_models_root(path: str) -> str | None:
    """Why ``path`` may not be walked, or None: it must resolve (symlinks, "..") to a
    directory strictly below the models root, so a message naming ``/`` or ``/etc``
    cannot make the agent read the whole disk."""
    refused = _outside_models_root(path)
    if refused is None:
        return None
    cid, status, shown, root = refused
    return Check.of(cid, status, path=shown, root=root).evidence


def _outside_models_root(path: str) -> tuple[str, str, str, str] | None:
    """(check id, status, path, root) when ``path`` is refused, else None."""
    root = models_root()
    real = os.path.realpath(path)
    if not os.path.isabs(path):
        return ("model_path.relative", FAIL, repr(path), root)
    if real == root or os.path.commonpath([root, real]) != root or real == "/":
        return ("model_path.outside", FAIL, path, root)
    return None


def check_model(path: str) -> tuple[Check, int | None, dict[str, Any] | None]:
    """The model directory: its manifest (engine/weights.py), which the control side
    compares across nodes file by file, and its total size."""
    if not path:
        return Check.of("model_path.none", WARN), None, None
    refused = _outside_models_root(path)
    if refused:
        cid, status, shown, root = refused
        return Check.of(cid, status, path=shown, root=root), None, None
    found = weights.manifest(node_driver().model_dir(path))
    found["path"] = path  # as the plan names it, not where a sim node keeps it
    result = weights.check(found)
    if not found["exists"]:
        result = check_text("model_files.missing", FAIL, path=path)
    return Check(**result), (found["total_bytes"] if found["exists"] else None), found


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

    The remedy for an HCCS link fault depends on it (engine/capabilities.py); unknown
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
