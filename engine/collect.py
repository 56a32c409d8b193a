"""One telemetry sample of a node: NPUs (npu-smi), HCCS links, RoCE ports (hccn_tool), host.

Every tool output goes through engine/parsers. A failure of one source is recorded
in ``errors`` with the raw text and never stops the others.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

import psutil

from engine.parsers import ParseError, Unsupported
from engine.parsers.hccn_tool import (
    parse_link,
    parse_link_stat,
    parse_net_health,
    parse_stat,
)
from engine.parsers.hccs import parse_hccs
from engine.parsers.npu_smi import parse_info
from engine.parsers.npu_smi_links import parse_hccs_bw
from engine.tools import ToolError, ToolResult, run_tool

# The -stat counters the console stores (npu-exporter exposes the same ones).
ROCE_COUNTERS = (
    "roce_tx_all_pkt_num",
    "roce_rx_all_pkt_num",
    "roce_tx_err_pkt_num",
    "roce_rx_err_pkt_num",
    "roce_new_pkt_rty_num",
    "roce_out_of_order_num",
    "roce_qp_status_err_num",
    "roce_unexpected_ack_num",
    "roce_verification_err_num",
    "roce_cqe_num",
    "mac_tx_bad_pkt_num",
    "mac_rx_bad_pkt_num",
    "mac_tx_total_pkt_num",
    "mac_rx_total_pkt_num",
)
RAW_KEEP = 4000  # characters of raw output kept with a parse error


class _Errors:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, source: str, message: str, raw: str = "") -> None:
        self.items.append({"source": source, "message": message, "raw": raw[:RAW_KEEP]})


def _call(argv: list[str], errors: _Errors, timeout: float) -> ToolResult | None:
    try:
        result = run_tool(argv, timeout=timeout)
    except ToolError as exc:
        errors.add(" ".join(argv), str(exc))
        return None
    if not result.ok:
        errors.add(
            " ".join(argv),
            f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[:300]}",
            result.stdout,
        )
        return None
    return result


def _npus(
    errors: _Errors, timeout: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    result = _call(["npu-smi", "info"], errors, timeout)
    if result is None:
        return [], []
    try:
        info = parse_info(result.stdout)
    except ParseError as exc:
        errors.add("npu-smi info", str(exc), result.stdout)
        return [], []
    return [c.to_dict() for c in info.chips], [p.to_dict() for p in info.processes]


def _hccs(
    npu: int, chip: int, timeout: float
) -> tuple[dict[str, Any] | None, _Errors, bool]:
    errors = _Errors()
    argv = ["npu-smi", "info", "-t", "hccs", "-i", str(npu), "-c", str(chip)]
    try:
        result = run_tool(argv, timeout=timeout)
    except ToolError as exc:
        errors.add(" ".join(argv), str(exc))
        return None, errors, False
    try:
        status = parse_hccs(result.stdout + result.stderr)
    except Unsupported:
        return (
            None,
            errors,
            True,
        )  # old driver: no -t hccs; reported as unsupported, not a failure
    except ParseError as exc:
        errors.add(" ".join(argv), str(exc), result.stdout)
        return None, errors, False
    return {"npu": npu, "chip": chip, **asdict(status)}, errors, False


def _hccs_bw(npu: int, chip: int, timeout: float) -> dict[str, Any] | None:
    """``npu-smi info -t hccs-bw`` of one chip (GB/s per link); None when unavailable."""
    argv = ["npu-smi", "info", "-t", "hccs-bw", "-i", str(npu), "-c", str(chip)]
    try:
        result = run_tool(argv, timeout=timeout)
        bw = parse_hccs_bw(result.stdout + result.stderr)
    except (ToolError, ParseError, Unsupported):
        return None
    return {"npu": npu, "chip": chip, **bw.to_dict()}


def _roce(device: int, timeout: float) -> tuple[dict[str, Any], _Errors]:
    errors = _Errors()
    port: dict[str, Any] = {"npu": device}
    parsers = (
        ("link", parse_link, "-link"),
        ("net_health", parse_net_health, "-net_health"),
        ("stat", parse_stat, "-stat"),
        ("link_stat", parse_link_stat, "-link_stat"),
    )
    for key, parser, cmd in parsers:
        result = _call(["hccn_tool", "-i", str(device), cmd, "-g"], errors, timeout)
        if result is None:
            port[key] = None
            continue
        try:
            value: Any = parser(result.stdout)
        except ParseError as exc:
            errors.add(f"hccn_tool -i {device} {cmd} -g", str(exc), result.stdout)
            port[key] = None
            continue
        if key == "stat":
            value = {k: value[k] for k in ROCE_COUNTERS if k in value}
        elif key == "link_stat":
            value = {
                "up_count": value.up_count,
                "down_count": value.down_count,
                "last_change": value.records[0] if value.records else None,
            }
        port[key] = value
    return port, errors


def host_sample(model_path: str | None, engine_pids: list[int]) -> dict[str, Any]:
    """CPU, memory, load, free disk where the model lives, and the engine processes' RSS."""
    path = model_path if model_path and os.path.exists(model_path) else "/"
    disk = shutil.disk_usage(path)
    rss = 0
    for pid in engine_pids:
        try:
            proc = psutil.Process(pid)
            rss += proc.memory_info().rss + sum(
                c.memory_info().rss for c in proc.children(recursive=True)
            )
        except psutil.Error:
            continue
    load1, load5, load15 = os.getloadavg()
    mem = psutil.virtual_memory()
    return {
        "cpu_pct": psutil.cpu_percent(interval=None),
        "mem_used_pct": mem.percent,
        "mem_total_mb": mem.total // 2**20,
        "load1": load1,
        "load5": load5,
        "load15": load15,
        "disk_path": path,
        "disk_free_gb": round(disk.free / 2**30, 2),
        "engine_rss_mb": round(rss / 2**20, 1),
    }


def collect(
    *,
    node: str,
    model_path: str | None = None,
    engine_pids: list[int] | None = None,
    timeout: float = 10.0,
    hccs_bw: bool = False,
) -> dict[str, Any]:
    """Run every tool once and return one JSON-safe sample of the node.

    ``hccs_bw``: also read ``npu-smi info -t hccs-bw`` per chip (for verifying a link
    switch, engine/link_verify.py); off for the regular poll, which has the counters.
    """
    started = time.time()
    errors = _Errors()
    chips, processes = _npus(errors, timeout)
    npu_ids = sorted({c["npu"] for c in chips})
    hccs: list[dict[str, Any]] = []
    roce: list[dict[str, Any]] = []
    hccs_unsupported = False
    with ThreadPoolExecutor(max_workers=4) as pool:
        hccs_jobs = [pool.submit(_hccs, c["npu"], c["chip"], timeout) for c in chips]
        roce_jobs = [pool.submit(_roce, i, timeout) for i in range(len(npu_ids))]
        for job in hccs_jobs:
            status, errs, unsupported = job.result()
            errors.items.extend(errs.items)
            hccs_unsupported = hccs_unsupported or unsupported
            if status is not None:
                hccs.append(status)
        for rjob in roce_jobs:
            port, errs = rjob.result()
            errors.items.extend(errs.items)
            roce.append(port)
        bw_jobs = (
            [pool.submit(_hccs_bw, c["npu"], c["chip"], timeout) for c in chips]
            if hccs_bw and not hccs_unsupported
            else []
        )
        bandwidth = [b for b in (job.result() for job in bw_jobs) if b is not None]
    return {
        "node": node,
        "collected_at": started,
        "duration_s": round(time.time() - started, 3),
        "chips": chips,
        "processes": processes,
        "hccs": hccs,
        "hccs_unsupported": hccs_unsupported,
        **({"hccs_bw": bandwidth} if hccs_bw else {}),
        "roce": roce,
        "host": host_sample(model_path, engine_pids or []),
        "errors": errors.items,
    }
