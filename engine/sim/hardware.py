"""Pure functions that turn a simulated node's state into hardware readings.

Inputs are the node's :class:`~engine.sim.state.NodeConfig`, :class:`~engine.sim.state.Faults`,
the engine dict from :func:`~engine.sim.state.read_engine`, the persisted counters and the time.
Outputs are dataclasses the fake ``npu-smi`` / ``hccn_tool`` print. Nothing here does I/O.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from engine.sim.state import Faults, NodeConfig

HCCS_LINKS = 7  # 7 HCCS links per 910B NPU (DCMI_HCCS_910B_PCS_NUM)
HCCS_LINK_PPS = 1_000_000.0  # packets/s per link at full load
HCCS_PACKET_BYTES = 20  # SINGLE_PACKETS_BYTES in the npu-smi source
ROCE_INTER_PPS = 200_000.0  # inter-node packets/s per NPU at full load (DP/EP traffic)
ROCE_INTRA_PPS = (
    1_000_000.0  # extra packets/s per NPU when intra-server traffic moves to RoCE
)
ROCE_PACKET_BYTES = 4096
CRC_SHARE = (
    0.25  # share of lost HCCS packets counted as CRC errors; the rest are retries
)
MAX_STEP_S = (
    5.0  # longest interval one report integrates (a paused process must not jump)
)
IDLE_HBM_MB = 3400  # firmware/runtime reservation seen on idle 910B (sample 25.2.0)
BUS_IDS = ("C1", "C2", "81", "82", "01", "02", "41", "42")  # Atlas 800T A2 slot order
WARNING_CODE = "80E01801"
WARNING_INFO = "HBM multi-bit ECC error"  # MindCluster FaultDiag meaning of 0x80E01801

ROCE_STAT_KEYS: tuple[str, ...] = (
    "mac_tx_mac_pause_num",
    "mac_rx_mac_pause_num",
    "mac_tx_pfc_pkt_num",
    *(f"mac_tx_pfc_pri{i}_pkt_num" for i in range(8)),
    "mac_rx_pfc_pkt_num",
    *(f"mac_rx_pfc_pri{i}_pkt_num" for i in range(8)),
    "mac_tx_total_pkt_num",
    "mac_tx_total_oct_num",
    "mac_tx_bad_pkt_num",
    "mac_tx_bad_oct_num",
    "mac_rx_total_pkt_num",
    "mac_rx_total_oct_num",
    "mac_rx_bad_pkt_num",
    "mac_rx_bad_oct_num",
    "roce_rx_rc_pkt_num",
    "roce_rx_all_pkt_num",
    "roce_rx_err_pkt_num",
    "roce_tx_rc_pkt_num",
    "roce_tx_all_pkt_num",
    "roce_tx_err_pkt_num",
    "roce_cqe_num",
    "roce_rx_cnp_pkt_num",
    "roce_tx_cnp_pkt_num",
    "roce_unexpected_ack_num",
    "roce_out_of_order_num",
    "roce_verification_err_num",
    "roce_qp_status_err_num",
    "roce_new_pkt_rty_num",
    "nic_tx_all_pkg_num",
    "nic_tx_all_oct_num",
    "nic_rx_all_pkg_num",
    "nic_rx_all_oct_num",
)


@dataclass
class HccsLinks:
    """Per-link HCCS counters of one NPU (7 entries each)."""

    tx: list[int] = field(default_factory=lambda: [0] * HCCS_LINKS)
    rx: list[int] = field(default_factory=lambda: [0] * HCCS_LINKS)
    retry: list[int] = field(default_factory=lambda: [0] * HCCS_LINKS)
    crc: list[int] = field(default_factory=lambda: [0] * HCCS_LINKS)


@dataclass
class ChipReading:
    """One NPU chip as ``npu-smi`` reports it."""

    npu_id: int
    chip_id: int
    name: str
    bus_id: str
    health: str
    error_codes: list[str]
    power_w: float
    temp_c: int
    aicore_pct: int
    hbm_used_mb: int
    hbm_total_mb: int
    hbm_temp_c: int
    process_pid: int | None
    process_mem_mb: int


# ---------------------------------------------------------------- counters


def _ints(v: Any, n: int) -> list[int]:
    if isinstance(v, list) and len(v) == n and all(isinstance(x, int) for x in v):
        return list(v)
    return [0] * n


def hccs_links(counters: dict[str, Any], npu: int) -> HccsLinks:
    """The persisted HCCS counters of ``npu`` (zeros when none are stored)."""
    raw = counters.get("hccs", {})
    entry = raw.get(str(npu), {}) if isinstance(raw, dict) else {}
    if not isinstance(entry, dict):
        entry = {}
    return HccsLinks(
        tx=_ints(entry.get("tx"), HCCS_LINKS),
        rx=_ints(entry.get("rx"), HCCS_LINKS),
        retry=_ints(entry.get("retry"), HCCS_LINKS),
        crc=_ints(entry.get("crc"), HCCS_LINKS),
    )


def roce_stats(counters: dict[str, Any], npu: int) -> dict[str, int]:
    """The persisted ``hccn_tool -stat`` counters of ``npu``, every key in display order."""
    raw = counters.get("roce", {})
    entry = raw.get(str(npu), {}) if isinstance(raw, dict) else {}
    if not isinstance(entry, dict):
        entry = {}
    out: dict[str, int] = {}
    for key in ROCE_STAT_KEYS:
        v = entry.get(key, 0)
        out[key] = v if isinstance(v, int) and not isinstance(v, bool) else 0
    return out


def hccs_carries_traffic(cfg: NodeConfig, link_mode: str) -> bool:
    """Intra-server traffic stays on HCCS unless the mode is roce AND the hardware honours
    it (per the server model's capability entry, engine/capabilities/servers.py: an Atlas 800T A2
    ignores the switch, an Atlas 200T A2 Box16 honours it)."""
    return link_mode != "roce" or not cfg.honours_switch()


def advance_counters(
    counters: dict[str, Any],
    *,
    cfg: NodeConfig,
    faults: Faults,
    link_mode: str,
    load: float,
    dt: float,
) -> dict[str, Any]:
    """Return new counters after ``dt`` seconds at ``load`` (0..1); the input is not modified.

    HCCS tx/rx grow ~HCCS_LINK_PPS × load per link while HCCS carries the intra-server
    traffic; retries + CRC errors are ``hccs_loss_pct`` % of the new tx packets. RoCE
    counters grow with inter-node traffic always, more when intra traffic moved to RoCE,
    and stand still while the roce-down fault is set.
    """
    out: dict[str, Any] = {"hccs": {}, "roce": {}}
    if "updated_at" in counters:
        out["updated_at"] = counters["updated_at"]
    on_hccs = hccs_carries_traffic(cfg, link_mode)
    loss = min(max(faults.hccs_loss_pct, 0.0), 100.0) / 100.0
    for npu in range(cfg.npu_count):
        links = hccs_links(counters, npu)
        if on_hccs and load > 0 and dt > 0:
            _add_hccs_traffic(links, npu, load=load, dt=dt, loss=loss)
        out["hccs"][str(npu)] = {
            "tx": links.tx,
            "rx": links.rx,
            "retry": links.retry,
            "crc": links.crc,
        }

        stats = roce_stats(counters, npu)
        if not faults.roce_down and load > 0 and dt > 0:
            _add_roce_traffic(stats, load=load, dt=dt, on_hccs=on_hccs)
        out["roce"][str(npu)] = stats
    return copy.deepcopy(out)


def _add_hccs_traffic(
    links: HccsLinks, npu: int, *, load: float, dt: float, loss: float
) -> None:
    """Grow ``npu``'s HCCS tx/rx by ``dt`` s at ``load``; ``loss`` (0..1) of it retried/CRC."""
    for i in range(HCCS_LINKS):
        # small per-link skew so links do not look identical
        pkts = int(round(HCCS_LINK_PPS * load * dt * (1.0 + 0.01 * ((npu + i) % 5))))
        links.tx[i] += pkts
        links.rx[i] += pkts - pkts // 1000
        lost = int(round(pkts * loss))
        crc = int(round(lost * CRC_SHARE))
        links.crc[i] += crc
        links.retry[i] += lost - crc


def _add_roce_traffic(
    stats: dict[str, int], *, load: float, dt: float, on_hccs: bool
) -> None:
    """Grow one NPU's RoCE/MAC/NIC counters by ``dt`` s at ``load`` (more without HCCS)."""
    pps = ROCE_INTER_PPS + (0.0 if on_hccs else ROCE_INTRA_PPS)
    pkts = int(round(pps * load * dt))
    octs = pkts * ROCE_PACKET_BYTES
    for side in ("tx", "rx"):
        stats[f"roce_{side}_rc_pkt_num"] += pkts
        stats[f"roce_{side}_all_pkt_num"] += pkts
        stats[f"mac_{side}_total_pkt_num"] += pkts + 2  # + LLDP/ARP housekeeping
        stats[f"mac_{side}_total_oct_num"] += octs + 128
    stats["roce_cqe_num"] += pkts // 16
    ctrl = max(1, int(round(10 * dt)))  # management traffic through the NIC
    stats["nic_tx_all_pkg_num"] += ctrl
    stats["nic_tx_all_oct_num"] += ctrl * 138
    stats["nic_rx_all_pkg_num"] += ctrl
    stats["nic_rx_all_oct_num"] += ctrl * 75


# ---------------------------------------------------------------- chip readings


def _jitter(npu: int, now: float, scale: float) -> float:
    """Deterministic wobble in [-scale, scale] that changes every 5 s."""
    slot = int(now // 5)
    return scale * math.sin(npu * 12.9898 + slot * 78.233)


def engine_running(engine: dict[str, Any]) -> bool:
    """True while an engine process holds the NPUs (any phase but stopped)."""
    return engine.get("phase", "stopped") != "stopped" and isinstance(
        engine.get("pid"), int
    )


def chip_readings(
    cfg: NodeConfig, faults: Faults, engine: dict[str, Any], now: float
) -> list[ChipReading]:
    """Readings for every NPU of the node (one chip per NPU on 910B)."""
    running = engine_running(engine)
    load = (
        float(engine.get("load", 0.0))
        if running and engine.get("phase") == "ready"
        else 0.0
    )
    load = min(1.0, max(0.0, load))
    engine_hbm = int(engine.get("hbm_used_mb", 0)) if running else 0
    chips: list[ChipReading] = []
    for npu in range(cfg.npu_count):
        idle_hbm = IDLE_HBM_MB + (npu * 7) % 31
        hbm = min(cfg.hbm_total_mb, max(idle_hbm, engine_hbm))
        if faults.hbm_pressure_pct is not None:
            hbm = max(hbm, int(cfg.hbm_total_mb * faults.hbm_pressure_pct / 100.0))
        temp = 40.0 + 30.0 * load + (npu % 4) + _jitter(npu, now, 1.0)
        if faults.overtemp_c is not None:
            temp = faults.overtemp_c
        power = 90.0 + 220.0 * load + (npu % 3) * 2.5 + _jitter(npu + 100, now, 3.0)
        aicore = int(
            round(load * 95 + (_jitter(npu + 200, now, 3.0) if load > 0 else 0.0))
        )
        warn = faults.npu_warning and npu == 0
        chips.append(
            ChipReading(
                npu_id=npu,
                chip_id=0,
                name=cfg.npu_name,
                bus_id=f"0000:{BUS_IDS[npu % len(BUS_IDS)]}:00.0",
                health="Warning" if warn else "OK",
                error_codes=[WARNING_CODE] if warn else [],
                power_w=round(power, 1),
                temp_c=int(round(temp)),
                aicore_pct=min(100, max(0, aicore)),
                hbm_used_mb=hbm,
                hbm_total_mb=cfg.hbm_total_mb,
                hbm_temp_c=int(round(temp)) + 2,
                process_pid=int(engine["pid"]) if running else None,
                process_mem_mb=max(0, engine_hbm - idle_hbm) if running else 0,
            )
        )
    return chips
