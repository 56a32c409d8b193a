"""One node's answer to ``node.collect`` and one engine scrape, and the parsing of a
node's sample: shape checks, normalising, HCCS link loss. No database."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class NodeResult:
    """What one node's agent answered to ``node.collect`` (``sample``) or why it did not (``error``)."""

    node_id: int
    sample: dict[str, Any] | None = None
    error: str | None = (
        None  # agent raised; None with no sample = no answer before the deadline
    )


@dataclass
class ScrapeResult:
    """One GET of a cluster's engine ``/metrics``: the body, or the error."""

    cluster_id: int
    url: str
    scraped_at: float
    text: str | None = None
    error: str | None = None
    health: int | None = (
        None  # HTTP status of the same server's /health; None = no answer
    )


def health_url(metrics_url: str) -> str:
    """The /health of the API server whose /metrics is ``metrics_url``."""
    base = (
        metrics_url[: -len("/metrics")]
        if metrics_url.endswith("/metrics")
        else metrics_url
    )
    return f"{base}/health"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    raise ValueError(f"{value!r} is not a number")


def _links_idle(prev_links: list[list[int]] | None, links: list[list[int]]) -> bool:
    """True when a usable previous sample shows no HCCS packet sent on any link since."""
    if not prev_links or len(prev_links) != len(links):
        return False
    return all(p[0] == c[0] for p, c in zip(prev_links, links, strict=True))


def _link_loss(
    prev_links: list[list[int]] | None, links: list[list[int]]
) -> float | None:
    """Worst link's (Δretries + Δerrors) / Δtx packets, in percent (100 when errors rise on a
    link that sends nothing); None without a usable previous sample."""
    if not prev_links or len(prev_links) != len(links):
        return None
    worst: float | None = None
    for (tx0, _rx0, rt0, er0), (tx1, _rx1, rt1, er1) in zip(
        prev_links, links, strict=True
    ):
        dtx, bad = tx1 - tx0, (rt1 - rt0) + (er1 - er0)
        if dtx < 0 or bad < 0:
            return None  # counters reset (driver reload): no window this round
        if dtx == 0:
            if bad == 0:
                continue  # idle link: no window
            loss = (
                100.0  # retries/CRC errors rising and nothing gets through: a dead link
            )
        else:
            loss = 100.0 * bad / dtx
        worst = loss if worst is None else max(worst, loss)
    return worst


@dataclass
class _Parsed:
    chips: list[dict[str, Any]]
    hccs: dict[str, dict[str, Any]]
    roce: list[dict[str, Any]]
    host: dict[str, Any]
    engine: dict[str, Any]
    errors: list[dict[str, Any]]
    collected_at: float | None
    hccs_unsupported: bool = False  # collect(): npu-smi has no -t hccs on this node
    server_model: dict[str, Any] | None = None  # asked for a never-detected node


def _parse_sample(sample: dict[str, Any]) -> _Parsed:
    """Check the agent's JSON shape and normalise it; raises ValueError naming what is wrong."""
    if not isinstance(sample, dict):
        raise ValueError(f"sample is a {type(sample).__name__}, not an object")
    chips_in = sample.get("chips")
    if not isinstance(chips_in, list):
        raise ValueError("sample has no chips list")
    chips = _parse_chips(chips_in)
    hccs = _parse_hccs(sample.get("hccs") or [])
    roce = _parse_roce(sample.get("roce") or [])
    host = sample.get("host") or {}
    errors = [e for e in sample.get("errors") or [] if isinstance(e, dict)]
    collected = sample.get("collected_at")
    return _Parsed(
        chips,
        hccs,
        roce,
        dict(host),
        dict(sample.get("engine") or {}),
        errors,
        float(collected) if isinstance(collected, int | float) else None,
        sample.get("hccs_unsupported") is True,
        sample["server_model"]
        if isinstance(sample.get("server_model"), dict)
        else None,
    )


def _parse_chips(chips_in: list[Any]) -> list[dict[str, Any]]:
    """Each chip's ids, names and readings (numbers or None)."""
    chips = []
    for c in chips_in:
        chips.append(
            {
                "npu": int(c["npu"]),
                "chip": int(c["chip"]),
                "name": str(c.get("name") or ""),
                "health": str(c.get("health") or ""),
                "bus_id": str(c.get("bus_id") or ""),
                "temp_c": _num(c.get("temp_c")),
                "power_w": _num(c.get("power_w")),
                "aicore_pct": _num(c.get("aicore_pct")),
                "hbm_used_mb": _num(c.get("hbm_used_mb")),
                "hbm_total_mb": _num(c.get("hbm_total_mb")),
            }
        )
    return chips


def _parse_hccs(hccs_in: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Each chip's HCCS health and link counters, keyed "npu.chip"."""
    hccs: dict[str, dict[str, Any]] = {}
    for h in hccs_in:
        links = [
            [
                int(lk["tx_packets"]),
                int(lk["rx_packets"]),
                int(lk["retry_count"]),
                int(lk["error_count"]),
            ]
            for lk in h["links"]
        ]
        hccs[f"{int(h['npu'])}.{int(h['chip'])}"] = {
            "health": h.get("health"),
            "links": links,
        }
    return hccs


def _parse_roce(roce_in: Iterable[Any]) -> list[dict[str, Any]]:
    """Each RoCE port's link, network health, counters and up/down counts."""
    roce = []
    for p in roce_in:
        stat = p.get("stat") or {}
        link_stat = p.get("link_stat") or {}
        roce.append(
            {
                "npu": int(p["npu"]),
                "link": p.get("link"),
                "net_health": p.get("net_health"),
                "stat": {k: int(v) for k, v in stat.items()},
                "up_count": link_stat.get("up_count"),
                "down_count": link_stat.get("down_count"),
            }
        )
    return roce
