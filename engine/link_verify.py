"""Did a RoCE failover move a node's intra-server traffic off HCCS? A verdict that can fail.

Inputs are collect samples (engine/collect.py ``collect()``): ``hccs`` (per chip, per
link counters of ``npu-smi info -t hccs``), ``hccs_unsupported``, ``roce`` (per NPU
``hccn_tool -stat -g`` counters), ``collected_at`` and, where collected, ``hccs_bw``
(``npu-smi info -t hccs-bw``: per link GB/s).

A window is two samples of one node (first, last). The node's HCCS packet rate in the
window before the change is its own baseline; after the change the same rate is
compared with it, and the other nodes' rates in the same after-window show whether the
cluster carried traffic at all. RoCE counters are never the evidence of a switch: on a
multi-node engine expert-parallel all-to-all between servers grows them anyway.

Verdicts: ``switched``, ``not_switched``, ``cannot_verify`` (counters unsupported or
empty, or no traffic to compare). Only ``switched`` is a pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SWITCHED, NOT_SWITCHED, CANNOT_VERIFY = "switched", "not_switched", "cannot_verify"
# verify_links_recovered (re-admission): the links that failed are healthy again, or not
RECOVERED, NOT_RECOVERED = "recovered", "not_recovered"

# Below this many HCCS+RoCE packets/s a node is idle: nothing can be compared.
MIN_TRAFFIC_PPS = 1000.0
# After a switch the node's HCCS rate must fall to this share of its own baseline.
SWITCHED_SHARE = 0.05
# hccs-bw: below this many GB/s (tx, summed over links) HCCS is idle.
MIN_BW_GBPS = 0.01

Sample = dict[str, Any]
Window = tuple[Sample, Sample]


@dataclass(frozen=True)
class LinkVerdict:
    status: str  # SWITCHED | NOT_SWITCHED | RECOVERED | NOT_RECOVERED | CANNOT_VERIFY
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True only for ``switched`` / ``recovered``; "cannot verify" is never a pass."""
        return self.status in (SWITCHED, RECOVERED)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _hccs_links(sample: Sample) -> dict[tuple[int, int, int], int] | None:
    """tx packets per (npu, chip, link); None when the sample has no HCCS counters."""
    if sample.get("hccs_unsupported"):
        return None
    out: dict[tuple[int, int, int], int] = {}
    for chip in sample.get("hccs") or []:
        for link in chip.get("links") or []:
            tx = link.get("tx_packets")
            if isinstance(tx, int):
                out[(chip.get("npu", 0), chip.get("chip", 0), link.get("index", 0))] = (
                    tx
                )
    return out or None


def _roce_tx(sample: Sample) -> int | None:
    total, seen = 0, False
    for port in sample.get("roce") or []:
        stat = port.get("stat") or {}
        value = stat.get("roce_tx_all_pkt_num")
        if isinstance(value, int):
            total += value
            seen = True
    return total if seen else None


def _dt(window: Window) -> float:
    return float(window[1].get("collected_at", 0.0)) - float(
        window[0].get("collected_at", 0.0)
    )


def hccs_rate(window: Window) -> float | None:
    """HCCS tx packets/s of a node over a window, summed over links present in both
    samples; None when either sample lacks counters or the links differ."""
    first, last = _hccs_links(window[0]), _hccs_links(window[1])
    dt = _dt(window)
    if first is None or last is None or dt <= 0 or set(first) != set(last):
        return None
    delta = 0
    for key, before in first.items():
        d = last[key] - before
        delta += last[key] if d < 0 else d  # counters restart from zero on a chip reset
    return delta / dt


def roce_rate(window: Window) -> float | None:
    first, last = _roce_tx(window[0]), _roce_tx(window[1])
    dt = _dt(window)
    if first is None or last is None or dt <= 0:
        return None
    d = last - first
    return (last if d < 0 else d) / dt


def hccs_bw_gbps(sample: Sample) -> float | None:
    """Total HCCS tx GB/s from ``npu-smi info -t hccs-bw`` (``hccs_bw`` entries), if any."""
    entries = sample.get("hccs_bw")
    if not entries:
        return None
    total, seen = 0.0, False
    for chip in entries:
        for link in chip.get("links") or []:
            value = link.get("tx_gbps")
            if isinstance(value, (int, float)):
                total += float(value)
                seen = True
    return total if seen else None


def verify_link_switch(
    before: Window, after: Window, peers_after: list[Window] | None = None
) -> LinkVerdict:
    """Verdict on one node's RoCE failover.

    ``before``: two samples of the node before the change (its baseline). ``after``:
    two samples of the node after the engine restarted with the RoCE pair.
    ``peers_after``: the other nodes' windows over the same after-period.
    """
    peers_after = peers_after or []
    base = hccs_rate(before)
    now = hccs_rate(after)
    evidence: dict[str, Any] = {
        "hccs_pps_before": base,
        "hccs_pps_after": now,
        "roce_pps_before": roce_rate(before),
        "roce_pps_after": roce_rate(after),
        "hccs_bw_gbps_after": hccs_bw_gbps(after[1]),
    }
    unsupported = any(s.get("hccs_unsupported") for s in (*before, *after))
    if base is None or now is None:
        return _without_packet_counters(unsupported, evidence)
    peer_rates = _peer_rates(peers_after)
    evidence["peer_pps_after"] = peer_rates
    idle = _idle_verdict(base, now, peer_rates, evidence)
    if idle is not None:
        return idle
    return _share_verdict(base, now, evidence)


def _without_packet_counters(
    unsupported: bool, evidence: dict[str, Any]
) -> LinkVerdict:
    """No HCCS packet rate: hccs-bw may still show a failure, else cannot verify."""
    bw = evidence["hccs_bw_gbps_after"]
    if bw is not None and bw > MIN_BW_GBPS:  # hccs-bw alone can still show a failure
        return LinkVerdict(
            NOT_SWITCHED,
            f"HCCS still carries {bw:.2f} GB/s after the change (npu-smi info -t "
            "hccs-bw); the per-link packet counters were not available.",
            evidence,
        )
    why = (
        "npu-smi info -t hccs is unsupported on this node (driver or chip)"
        if unsupported
        else "the node's HCCS counters are empty or the links differ between samples"
    )
    return LinkVerdict(
        CANNOT_VERIFY,
        f"Cannot verify the switch: {why}. This is not a pass; take the next remedy "
        "or escalate.",
        evidence,
    )


def _peer_rates(peers_after: list[Window]) -> list[float]:
    """Each peer's HCCS plus RoCE packets/s after the change (a missing rate is 0)."""
    peer_rates = []
    for window in peers_after:
        h, r = hccs_rate(window), roce_rate(window)
        peer_rates.append((h or 0.0) + (r or 0.0))
    return peer_rates


def _idle_verdict(
    base: float, now: float, peer_rates: list[float], evidence: dict[str, Any]
) -> LinkVerdict | None:
    """Cannot verify when there was no traffic before, or none anywhere after; else None."""
    if base < MIN_TRAFFIC_PPS:
        return LinkVerdict(
            CANNOT_VERIFY,
            f"Cannot verify the switch: no traffic on the node's HCCS links before the "
            f"change ({base:.0f} packets/s), so there is no baseline to compare with.",
            evidence,
        )
    node_traffic_after = now + (evidence["roce_pps_after"] or 0.0)
    if node_traffic_after < MIN_TRAFFIC_PPS and not any(
        p >= MIN_TRAFFIC_PPS for p in peer_rates
    ):
        return LinkVerdict(
            CANNOT_VERIFY,
            "Cannot verify the switch: no traffic after the change on this node or its "
            "peers, so idle HCCS links prove nothing.",
            evidence,
        )
    return None


def _share_verdict(base: float, now: float, evidence: dict[str, Any]) -> LinkVerdict:
    """Switched when HCCS traffic fell to SWITCHED_SHARE of the baseline, else not."""
    share = now / base
    evidence["hccs_share_of_baseline"] = round(share, 4)
    if share <= SWITCHED_SHARE:
        return LinkVerdict(
            SWITCHED,
            f"HCCS traffic fell to {100 * share:.1f} % of the node's own baseline "
            f"({now:.0f} of {base:.0f} packets/s) while traffic continued.",
            evidence,
        )
    return LinkVerdict(
        NOT_SWITCHED,
        f"HCCS still carries {100 * share:.0f} % of the node's baseline ({now:.0f} of "
        f"{base:.0f} packets/s): the hardware did not move intra-server traffic to RoCE.",
        evidence,
    )


# ------------------------------------------------------------------ re-admit

LinkId = tuple[int, int, int]  # (npu, chip, link index)


def _link_counters(sample: Sample) -> dict[LinkId, tuple[int, int]]:
    """(tx packets, retries + errors) per link; empty when the sample has none."""
    out: dict[LinkId, tuple[int, int]] = {}
    if sample.get("hccs_unsupported"):
        return out
    for chip in sample.get("hccs") or []:
        for link in chip.get("links") or []:
            tx, rt, er = (
                link.get(k) for k in ("tx_packets", "retry_count", "error_count")
            )
            if isinstance(tx, int) and isinstance(rt, int) and isinstance(er, int):
                key = (chip.get("npu", 0), chip.get("chip", 0), link.get("index", 0))
                out[key] = (tx, rt + er)
    return out


def failing_links(window: Window, threshold_pct: float) -> list[LinkId]:
    """Links whose (Δretries + Δerrors) / Δtx over the window is at least
    ``threshold_pct`` (errors on a link that sent nothing count as 100 %): the links an
    incident records, so that re-admission checks exactly those."""
    first, last = _link_counters(window[0]), _link_counters(window[1])
    bad: list[LinkId] = []
    for key in sorted(set(first) & set(last)):
        dtx, dbad = last[key][0] - first[key][0], last[key][1] - first[key][1]
        if dtx < 0 or dbad < 0 or (dtx == 0 and dbad == 0):
            continue
        if (100.0 if dtx == 0 else 100.0 * dbad / dtx) >= threshold_pct:
            bad.append(key)
    return bad


def verify_links_recovered(
    window: Window, failed: list[LinkId], threshold_pct: float
) -> LinkVerdict:
    """Before a replaced node is re-admitted: do the links that failed now carry traffic
    below ``threshold_pct`` loss? ``recovered`` / ``not_recovered``; a link with no
    traffic, or counters that are missing, is ``cannot_verify`` (not a pass)."""
    first, last = _link_counters(window[0]), _link_counters(window[1])
    evidence: dict[str, Any] = {"failed_links": [list(k) for k in failed]}
    if not failed:
        return LinkVerdict(
            CANNOT_VERIFY, "No failed links were recorded for this node.", evidence
        )
    missing = [k for k in failed if k not in first or k not in last]
    if missing:
        return LinkVerdict(
            CANNOT_VERIFY,
            f"Cannot check links {missing}: their HCCS counters are unsupported or "
            "missing in the samples.",
            evidence,
        )
    losses: dict[str, float] = {}
    for key in failed:
        dtx, dbad = last[key][0] - first[key][0], last[key][1] - first[key][1]
        if dtx <= 0 and dbad <= 0:
            return LinkVerdict(
                CANNOT_VERIFY,
                f"Link {key} carried no traffic in the window: its loss cannot be "
                "measured. Send traffic through the engine, then check again.",
                evidence,
            )
        losses[str(key)] = 100.0 if dtx <= 0 else 100.0 * max(dbad, 0) / dtx
    evidence["loss_pct"] = losses
    worst = max(losses.values())
    if worst >= threshold_pct:
        return LinkVerdict(
            NOT_RECOVERED,
            f"The links that failed still lose {worst:.1f} % (threshold "
            f"{threshold_pct:g} %).",
            evidence,
        )
    return LinkVerdict(
        RECOVERED,
        f"The links that failed carry traffic with {worst:.2f} % loss (threshold "
        f"{threshold_pct:g} %).",
        evidence,
    )
