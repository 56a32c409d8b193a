"""The NPUs as ``npu-smi info`` shows them: health, count and HBM already taken."""

from __future__ import annotations

from engine.parsers import ParseError
from engine.parsers.npu_smi import NpuSmiInfo, parse_info
from engine.preflight.check import FAIL, PASS, WARN, Check, _tool

# HBM already in use on an idle chip above this share means another process holds the NPU.
HBM_BUSY_PCT = 15.0


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
