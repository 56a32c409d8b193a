"""Diagnose evidence bundles of several nodes together: findings in time order, first fault marked.

On a multi-node engine the node that reports a failure is often not the one that
caused it: one dead rank takes the DP group down (vllm-ascend issue 16342) and HCCL
reports the loss much later as a timeout on every peer (issue 16652). So the first
fault is the *earliest* error across nodes, not the most specific or loudest one.
Times come from each line's own stamp (CANN plog, vLLM, dmesg ISO); lines without one
take the nearest stamp above them (an EE9999 block prints it once). vLLM stamps have
whole seconds only, so ordering compares whole seconds first and breaks ties by how
close a signature is to a root cause (its specificity), then by the finer time.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

from engine.diagnose import diagnose, load_table

# CANN plog / EE9999: 2026-03-18-10:33:52.113.403
_CANN = re.compile(
    r"\b(\d{4})-(\d{2})-(\d{2})-(\d{2}):(\d{2}):(\d{2})\.(\d{3})(?:\.(\d{3}))?"
)
# dmesg --time-format iso: 2026-12-04T16:30:01,123456+00:00
_ISO = re.compile(
    r"\b(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[,.](\d{1,6}))?"
)
# vLLM logger: "ERROR 12-04 16:30:01 [core_client.py:564]" (no year)
_VLLM = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\b"
)
SEARCH_UP = 60  # lines to look above an unstamped evidence line
DIAGNOSED_FILES = ("engine.log", "dmesg-npu.txt")
FAULT_SEVERITIES = ("critical", "error")


def line_time(line: str, year: int) -> float | None:
    """Seconds since the epoch of a log line's own stamp (wall clock as printed), or None."""
    m = _CANN.search(line)
    if m:
        y, mo, d, h, mi, s, ms, us = m.groups()
        base = calendar.timegm(
            (int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0)
        )
        return base + int(ms) / 1e3 + int(us or 0) / 1e6
    m = _ISO.search(line)
    if m:
        y, mo, d, h, mi, s, frac = m.groups()
        base = calendar.timegm(
            (int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0)
        )
        return base + (int(frac) / 10 ** len(frac) if frac else 0.0)
    m = _VLLM.search(line)
    if m:
        mo, d, h, mi, s = (int(g) for g in m.groups())
        return float(calendar.timegm((year, mo, d, h, mi, s, 0, 0, 0)))
    return None


@dataclass
class Finding:
    """One recognised problem on one node, with when it was logged and whether it is the first fault."""

    node: str
    file: str
    line: int
    time: float | None
    id: str
    severity: str
    specificity: int
    cause: str
    fix: str
    cause_zh: str
    fix_zh: str
    evidence: str
    first: bool = False
    time_text: str = ""  # the stamp as the node logged it (its wall clock), to the ms

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _diagnosed(name: str) -> bool:
    return name in DIAGNOSED_FILES or name.startswith("plog/")


def node_findings(bundle: dict[str, Any], year: int) -> list[Finding]:
    """Every signature found in one node's bundle, one per file and signature."""
    table = load_table()
    found: list[Finding] = []
    for f in bundle.get("files", []):
        name = str(f.get("name", ""))
        if not _diagnosed(name):
            continue
        lines = str(f.get("text", "")).splitlines()
        for d in diagnose(lines):
            when = None
            for k in range(d.line - 1, max(-1, d.line - 1 - SEARCH_UP), -1):
                when = line_time(lines[k], year)
                if when is not None:
                    break
            sig = table.by_id.get(d.id)
            found.append(
                Finding(
                    node=str(bundle.get("node", "?")),
                    file=name,
                    line=d.line,
                    time=when,
                    id=d.id,
                    severity=d.severity,
                    specificity=sig.specificity if sig else 0,
                    cause=d.cause,
                    fix=d.fix,
                    cause_zh=d.cause_zh,
                    fix_zh=d.fix_zh,
                    evidence=d.evidence[:500],
                    time_text=_as_logged(when),
                )
            )
    return found


def _as_logged(when: float | None) -> str:
    if when is None:
        return ""
    ms = int(round((when % 1) * 1000)) % 1000
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(when))) + f".{ms:03d}"


def _order(f: Finding) -> tuple[Any, ...]:
    if f.time is None:
        return (1, 0, -f.specificity, 0.0, f.node)
    return (0, int(f.time), -f.specificity, f.time, f.node)


def cross_node_findings(bundles: list[dict[str, Any]], year: int) -> list[Finding]:
    """All nodes' findings, earliest first; the earliest error is marked ``first``.

    Findings without any time stamp go last; if no error has a time, the most
    specific error is marked first instead.
    """
    found = [f for b in bundles for f in node_findings(b, year)]
    found.sort(key=_order)
    faults = [f for f in found if f.severity in FAULT_SEVERITIES]
    timed = [f for f in faults if f.time is not None]
    if timed:
        timed[0].first = True
    elif faults:
        max(faults, key=lambda f: f.specificity).first = True
    return found
