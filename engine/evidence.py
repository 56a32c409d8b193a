"""Evidence bundle: what one node knows about a failure, gathered in bounded size.

The agent's ``node.evidence`` task calls ``gather``. It reads only these places:
the engine's log (through the driver: journal for systemd, the log file for
process/sim), the newest CANN plog files under ``~/ascend/log/debug/plog`` and
``$ASCEND_PROCESS_LOG_PATH`` (names ``plog-<pid>_<timestamp>.log`` only, no symlinks),
``npu-smi info``, ``hccn_tool -i N -link -g`` / ``-net_health -g``, the kernel ring
buffer lines about davinci/HCCS (``dmesg``, when readable) and the stack versions. It
never reads the environment beyond ``ASCEND_PROCESS_LOG_PATH`` and never includes the
engine's argv or env (they may hold an API key).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.parsers import ParseError
from engine.parsers.npu_smi import parse_info
from engine.tools import ToolError, ToolResult, run_tool

# Bounds: one file, one node's bundle, how many plog files, how many engine log lines.
MAX_FILE_BYTES = 256 * 1024
MAX_NODE_BYTES = 2 * 1024 * 1024
PLOG_FILES = 6
MAX_LOG_LINES = 5000
MAX_NPUS = 16
# CANN names a process log plog-<pid>_<yyyymmddhhmmssmmm>.log (e.g.
# plog-13502_20260724234105606.log) under $HOME/ascend/log/debug/plog
# (CANN log reference; hiascend "日志参考" and aclnn debugging guides).
PLOG_NAME = re.compile(r"^plog-[0-9]{1,10}_[0-9]{14,17}\.log\Z")
# Kernel lines worth keeping: the NPU driver (davinci, devdrv, devmm, hisi_hdc) and HCCS.
DMESG_KEEP = re.compile(r"davinci|devdrv|devmm|hisi_hdc|hccs|\bnpu\b", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass
class BundleFile:
    """One file of a node's bundle: its text (a tail when ``truncated``) and where it came from."""

    name: str
    text: str
    size: int  # bytes of the original (before the tail was taken)
    truncated: bool
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean(text: str) -> str:
    """No control characters but tab and newline (the bundle is rendered and tarred)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def _tail_text(data: bytes, cap: int) -> tuple[str, bool]:
    if len(data) <= cap:
        return _clean(data.decode("utf-8", "replace")), False
    tail = data[-cap:]
    cut = tail.find(b"\n")
    if 0 <= cut < len(tail) - 1:
        tail = tail[cut + 1 :]  # drop the partial first line
    return _clean(tail.decode("utf-8", "replace")), True


def read_tail(path: Path, cap: int = MAX_FILE_BYTES) -> tuple[str, int, bool]:
    """The last ``cap`` bytes of a regular file as text: (text, original size, truncated)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - cap))
        data = fh.read(cap)
    if size > cap:
        cut = data.find(b"\n")
        if 0 <= cut < len(data) - 1:
            data = data[cut + 1 :]  # drop the partial first line
    return _clean(data.decode("utf-8", "replace")), size, size > cap


def plog_dirs(home: Path, environ: Mapping[str, str]) -> list[Path]:
    """Where CANN writes process logs: ~/ascend/log/debug/plog, and under ASCEND_PROCESS_LOG_PATH."""
    dirs = [home / "ascend" / "log" / "debug" / "plog"]
    custom = environ.get("ASCEND_PROCESS_LOG_PATH", "").strip()
    if custom and Path(custom).is_absolute():
        root = Path(custom)
        dirs += [root / "debug" / "plog", root / "plog"]
    return dirs


def newest_plogs(dirs: list[Path], limit: int = PLOG_FILES) -> list[Path]:
    """The ``limit`` most recently written plog files (regular files with CANN's name only)."""
    found: list[tuple[float, Path]] = []
    for directory in dirs:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if not PLOG_NAME.match(entry.name):
                continue
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                found.append(
                    (entry.stat(follow_symlinks=False).st_mtime, Path(entry.path))
                )
            except OSError:
                continue
    found.sort(key=lambda item: item[0], reverse=True)
    return [path for _, path in found[:limit]]


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run dmesg (the one non-Ascend binary here); the one place to mock. argv list, no shell."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False
    )


def kernel_lines(run: Callable[[list[str], float], Any] = _run) -> BundleFile:
    """dmesg lines about the NPU driver and HCCS, or why they could not be read."""
    argv = ["dmesg", "--time-format", "iso"]  # ISO 8601 stamps: comparable across nodes
    try:
        proc = run(argv, 10.0)
    except (OSError, subprocess.TimeoutExpired) as exc:
        note = f"dmesg not readable: {exc}"
        return BundleFile("dmesg-npu.txt", note + "\n", 0, False, "dmesg")
    if proc.returncode != 0:
        why = (proc.stderr or "").strip().splitlines()[:1] or [
            f"exit {proc.returncode}"
        ]
        note = f"dmesg not readable ({why[0]}); kernel.dmesg_restrict may forbid it"
        return BundleFile("dmesg-npu.txt", _clean(note) + "\n", 0, False, "dmesg")
    kept = [line for line in proc.stdout.splitlines() if DMESG_KEEP.search(line)]
    text, truncated = _tail_text("\n".join(kept).encode(), MAX_FILE_BYTES)
    return BundleFile(
        "dmesg-npu.txt", text + "\n", len(proc.stdout), truncated, "dmesg"
    )


def _tool_file(
    name: str, argv: list[str], tool: Callable[[list[str], float], ToolResult]
) -> tuple[BundleFile, ToolResult | None]:
    try:
        res = tool(argv, 15.0)
    except ToolError as exc:
        return BundleFile(
            name, f"{' '.join(argv)}: {exc}\n", 0, False, " ".join(argv)
        ), None
    body = res.stdout + (f"\n[stderr]\n{res.stderr}" if res.stderr.strip() else "")
    text, truncated = _tail_text(body.encode(), MAX_FILE_BYTES)
    return BundleFile(name, text, len(body), truncated, " ".join(argv)), res


def _npu_count(res: ToolResult | None) -> int:
    if res is None or not res.ok:
        return 0

    try:
        info = parse_info(res.stdout)
    except (ParseError, ValueError):
        return 0
    return min(len({chip.npu for chip in info.chips}), MAX_NPUS)


def links(count: int, tool: Callable[[list[str], float], ToolResult]) -> BundleFile:
    """Per NPU: RoCE port link state and net health, as hccn_tool prints them."""
    parts: list[str] = []
    for device in range(count):
        for what in ("-link", "-net_health"):
            argv = ["hccn_tool", "-i", str(device), what, "-g"]
            try:
                res = tool(argv, 10.0)
                out = (res.stdout or res.stderr).strip()
            except ToolError as exc:
                out = str(exc)
            parts.append(f"$ {' '.join(argv)}\n{out}\n")
    body = "".join(parts) or "no NPU found by npu-smi info; link state not read\n"
    text, truncated = _tail_text(body.encode(), MAX_FILE_BYTES)
    return BundleFile("links.txt", _clean(text), len(body), truncated, "hccn_tool")


def gather(
    *,
    node: str,
    engine_log: list[str],
    home: Path,
    environ: Mapping[str, str],
    versions: dict[str, Any],
    tool: Callable[[list[str], float], ToolResult] = lambda argv, t: run_tool(argv, t),
    run: Callable[[list[str], float], Any] = _run,
    max_bytes: int = MAX_NODE_BYTES,
) -> dict[str, Any]:
    """One node's bundle: {"node", "collected_at", "files": [...], "skipped": [...]}.

    Files past ``max_bytes`` in total are left out and named in ``skipped``; the
    engine log, npu-smi and links come first so they are never the ones left out.
    """
    files: list[BundleFile] = []
    log_text, truncated = _tail_text(
        "\n".join(engine_log[-MAX_LOG_LINES:]).encode(), MAX_FILE_BYTES
    )
    files.append(
        BundleFile(
            "engine.log", log_text + "\n", len(log_text), truncated, "driver logs"
        )
    )
    npu_file, npu_res = _tool_file("npu-smi-info.txt", ["npu-smi", "info"], tool)
    files.append(npu_file)
    files.append(links(_npu_count(npu_res), tool))
    files.append(kernel_lines(run))
    files.append(BundleFile(
        "versions.json", json.dumps(versions, indent=2, sort_keys=True) + "\n",
        0, False, "engine.preflight.versions",
    ))  # fmt: skip
    for path in newest_plogs(plog_dirs(home, environ)):
        try:
            text, size, cut = read_tail(path)
        except OSError:
            continue
        files.append(BundleFile(f"plog/{path.name}", text, size, cut, str(path)))
    kept: list[BundleFile] = []
    skipped: list[str] = []
    total = 0
    for f in files:
        size = len(f.text.encode())
        if total + size > max_bytes:
            skipped.append(f.name)
            continue
        total += size
        kept.append(f)
    return {
        "node": node,
        "collected_at": time.time(),
        "files": [f.to_dict() for f in kept],
        "skipped": skipped,
        "bytes": total,
    }


def check_request(*, log_lines: Any) -> int:
    """Strict check of the ``node.evidence`` arguments; raises ValueError naming the field."""
    if isinstance(log_lines, bool) or not isinstance(log_lines, int):
        raise ValueError(
            f"log_lines must be a whole number, got {type(log_lines).__name__}"
        )
    if not 1 <= log_lines <= MAX_LOG_LINES:
        raise ValueError(f"log_lines must be in [1, {MAX_LOG_LINES}], got {log_lines}")
    return log_lines
