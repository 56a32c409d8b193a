"""Agent ``node.collect`` output built from captured tool output (tests/data/ascend) with the real parsers.

Same shape engine/collect.py returns; ``advance`` moves the HCCS counters so two
consecutive samples have a loss window.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.collect import ROCE_COUNTERS
from engine.parsers.hccn_tool import (
    parse_link,
    parse_link_stat,
    parse_net_health,
    parse_stat,
)
from engine.parsers.hccs import parse_hccs
from engine.parsers.npu_smi import parse_info

DATA = Path(__file__).resolve().parents[1] / "data" / "ascend"
VLLM = Path(__file__).resolve().parents[1] / "data" / "vllm"
INFO = parse_info((DATA / "npu-smi-info-910b3-8card-procs-25.3.rc1.txt").read_text())
HCCS = parse_hccs(
    (DATA / "npu-smi-info-t-hccs-i0-c0-910b-ok-SYNTHESISED.txt").read_text()
)
LINK = parse_link((DATA / "hccn_tool-link-g-up.txt").read_text())
NET = parse_net_health((DATA / "hccn_tool-net_health-g-init.txt").read_text())
STAT = parse_stat((DATA / "hccn_tool-stat-g-910b-SYNTHESISED.txt").read_text())
LINK_STAT = parse_link_stat(
    (DATA / "hccn_tool-link_stat-g-device-format.txt").read_text()
)


def agent_sample(
    node: str,
    *,
    advance: dict[int, tuple[int, int, int]] | None = None,
    engine_state: str = "stopped",
) -> dict[str, Any]:
    """One node's sample; ``advance`` = {npu: (Δtx, Δretry, Δerror)} added to link 0 of that NPU."""
    chips = [c.to_dict() for c in INFO.chips]
    hccs = []
    for c in INFO.chips:
        status = asdict(HCCS)
        if advance and c.npu in advance:
            dtx, dretry, derr = advance[c.npu]
            link = status["links"][0]
            link["tx_packets"] += dtx
            link["rx_packets"] += dtx
            link["retry_count"] += dretry
            link["error_count"] += derr
        hccs.append({"npu": c.npu, "chip": c.chip, **status})
    roce = [
        {
            "npu": i,
            "link": LINK,
            "net_health": NET,
            "stat": {k: STAT[k] for k in ROCE_COUNTERS if k in STAT},
            "link_stat": {
                "up_count": LINK_STAT.up_count,
                "down_count": LINK_STAT.down_count,
                "last_change": LINK_STAT.records[0],
            },
        }
        for i in range(len(chips))
    ]
    return {
        "node": node,
        "collected_at": time.time(),
        "duration_s": 0.4,
        "chips": chips,
        "processes": [p.to_dict() for p in INFO.processes],
        "hccs": hccs,
        "hccs_unsupported": False,
        "roce": roce,
        "host": {
            "cpu_pct": 12.5,
            "mem_used_pct": 40.0,
            "mem_total_mb": 1_500_000,
            "load1": 3.0,
            "load5": 2.0,
            "load15": 1.0,
            "disk_path": "/",
            "disk_free_gb": 812.5,
            "engine_rss_mb": 0.0,
        },
        "errors": [],
        "engine": {"state": engine_state, "pid": None, "uptime_s": None},
    }
