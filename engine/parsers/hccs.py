"""Parse ``npu-smi info -t hccs -i N -c C`` and compute HCCS packet loss.

No public capture of this output exists; the format follows the tool's source,
hicann/driver npu_info_print_ext.c ``print_npu_hccs_lane`` /
``print_npu_hccs_lane_packet_info`` (ascend-facts.md §2)::

    \\thccs health status            : OK
    \\thccs lane mode                : [4                    4                    ... ]
    \\thccs link lane list           : [1111                 1111                 ... ]
    \\thccs link speed               : [224                  224                  ... ]
    \\thccs tx packets               : [%-20llu %-20llu ... ]
    \\thccs tx bytes                 : [...]          (= packets x 20)
    \\thccs rx packets / rx bytes / retry count / error count : [...]
    \\thccs first error lane         : NA             (or the lane number)

Arrays hold one entry per HCCS link: PCS 1..7 on 910B, so 7 links. ``-lane N``
prints the same keys with one entry each. 310P prints only the packet, retry and
error arrays (no health, lane mode or first error lane).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.parsers import ParseError
from engine.parsers._common import check_npu_smi_unsupported, numbered, require_text

_KEYS = {
    "hccs health status": "health",
    "hccs lane mode": "lane_mode",
    "hccs link lane list": "lane_list",
    "hccs link speed": "speed",
    "hccs tx packets": "tx_packets",
    "hccs tx bytes": "tx_bytes",
    "hccs rx packets": "rx_packets",
    "hccs rx bytes": "rx_bytes",
    "hccs retry count": "retry_count",
    "hccs error count": "error_count",
    "hccs first error lane": "first_error_lane",
}
_REQUIRED_ARRAYS = ("tx_packets", "rx_packets", "retry_count", "error_count")
_INT_ARRAYS = (
    "lane_mode",
    "speed",
    "tx_packets",
    "tx_bytes",
    "rx_packets",
    "rx_bytes",
    "retry_count",
    "error_count",
)
_ARRAY = re.compile(r"^\[(.*)\]$")


@dataclass(frozen=True)
class HccsLink:
    """Counters of one HCCS link; ``index`` = 0-based position in the printed arrays."""

    index: int
    lane_mode: int | None  # lanes in use: 0, 1, 2 or 4 (None on 310P)
    speed: int | None  # Gbit/s = lane_mode x 56
    tx_packets: int
    tx_bytes: int | None
    rx_packets: int
    rx_bytes: int | None
    retry_count: int
    error_count: int  # CRC errors
    lane_list: str | None = None  # 4-bit lane bitmap, e.g. "1111"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HccsStatus:
    """One chip's HCCS state. ``health`` is "OK" or "NOK" (None only on 310P output)."""

    health: str | None
    links: list[HccsLink] = field(default_factory=list)
    first_error_lane: str | None = None  # None when npu-smi prints NA

    def to_dict(self) -> dict[str, Any]:
        return {
            "health": self.health,
            "first_error_lane": self.first_error_lane,
            "links": [link.to_dict() for link in self.links],
        }


def parse_hccs(text: str) -> HccsStatus:
    """Parse ``npu-smi info -t hccs``.

    Raises Unsupported when npu-smi says the type is missing (old drivers) and
    ParseError naming the line for anything else it cannot read.
    """
    require_text(text, "npu-smi info -t hccs")
    check_npu_smi_unsupported(text)
    scalars, arrays = _read_keys(text)
    count = _link_count(arrays, text)
    health = _health(scalars, arrays, text)
    first_error = _first_error_lane(scalars, text)
    return HccsStatus(
        health=health, links=_links(arrays, count), first_error_lane=first_error
    )


def _read_keys(
    text: str,
) -> tuple[dict[str, tuple[str, int]], dict[str, tuple[list[str], int]]]:
    """Each known key's value and line: scalars as text, arrays as their items."""
    scalars: dict[str, tuple[str, int]] = {}
    arrays: dict[str, tuple[list[str], int]] = {}
    for lineno, line in numbered(text):
        s = line.strip()
        if not s:
            continue
        key, sep, value = s.partition(":")
        key, value = " ".join(key.split()), value.strip()
        name = _KEYS.get(key)
        if not sep or name is None:
            raise ParseError("unrecognized npu-smi hccs line", raw=text, line=lineno)
        if name in scalars or name in arrays:
            raise ParseError(f"duplicate key {key!r}", raw=text, line=lineno)
        if name in ("health", "first_error_lane"):
            scalars[name] = (value, lineno)
            continue
        m = _ARRAY.match(value)
        if not m or not m.group(1).split():
            raise ParseError(f"{key}: expected '[v1 v2 ...]'", raw=text, line=lineno)
        items = m.group(1).split()
        if name in _INT_ARRAYS and not all(i.isdigit() for i in items):
            raise ParseError(f"{key}: expected integers", raw=text, line=lineno)
        if name == "lane_list" and not all(re.fullmatch(r"[01]+", i) for i in items):
            raise ParseError(f"{key}: expected lane bitmaps", raw=text, line=lineno)
        arrays[name] = (items, lineno)
    return scalars, arrays


def _link_count(arrays: dict[str, tuple[list[str], int]], text: str) -> int:
    """The number of links: every required array present, every array that long."""
    for name in _REQUIRED_ARRAYS:
        if name not in arrays:
            key = next(k for k, v in _KEYS.items() if v == name)
            raise ParseError(f"npu-smi hccs output lacks {key!r}", raw=text)
    count = len(arrays["tx_packets"][0])
    for items, lineno in arrays.values():
        if len(items) != count:
            raise ParseError(
                f"{len(items)} entries where tx packets has {count}",
                raw=text,
                line=lineno,
            )
    return count


def _health(
    scalars: dict[str, tuple[str, int]],
    arrays: dict[str, tuple[list[str], int]],
    text: str,
) -> str | None:
    """``hccs health status`` (OK / NOK); None only on output that never prints it."""
    health: str | None = None
    if "health" in scalars:
        health, lineno = scalars["health"]
        if health not in ("OK", "NOK"):
            raise ParseError(f"unknown hccs health {health!r}", raw=text, line=lineno)
    elif "lane_mode" in arrays:  # 910B/A3 output always starts with the health line
        raise ParseError("npu-smi hccs output lacks 'hccs health status'", raw=text)
    return health


def _first_error_lane(scalars: dict[str, tuple[str, int]], text: str) -> str | None:
    """The first error lane, or None when absent or ``NA``."""
    first_error: str | None = None
    if "first_error_lane" in scalars:
        value, lineno = scalars["first_error_lane"]
        if value != "NA":
            if not value.isdigit():
                raise ParseError(
                    f"bad first error lane {value!r}", raw=text, line=lineno
                )
            first_error = value
    return first_error


def _links(arrays: dict[str, tuple[list[str], int]], count: int) -> list[HccsLink]:
    """One HccsLink per array column; optional arrays absent give None."""

    def col(name: str, i: int) -> int | None:
        return int(arrays[name][0][i]) if name in arrays else None

    def req(name: str, i: int) -> int:
        return int(arrays[name][0][i])

    return [
        HccsLink(
            index=i,
            lane_mode=col("lane_mode", i),
            speed=col("speed", i),
            tx_packets=req("tx_packets", i),
            tx_bytes=col("tx_bytes", i),
            rx_packets=req("rx_packets", i),
            rx_bytes=col("rx_bytes", i),
            retry_count=req("retry_count", i),
            error_count=req("error_count", i),
            lane_list=arrays["lane_list"][0][i] if "lane_list" in arrays else None,
        )
        for i in range(count)
    ]


def hccs_loss(prev: HccsStatus, cur: HccsStatus) -> float:
    """Worst link's (Δretries + Δerrors) / Δtx_packets between two samples (a fraction).

    0.0 for a link whose tx counter did not move. When any counter of a link went
    backwards (counters cleared or chip reset) that link's current values are
    taken as the delta. Raises ValueError if the samples have different links.
    Multiply by 100 for percent (the alert threshold is 15 %).
    """
    if len(prev.links) != len(cur.links):
        raise ValueError(
            f"HCCS samples have {len(prev.links)} and {len(cur.links)} links"
        )
    worst = 0.0
    for before, after in zip(prev.links, cur.links, strict=True):
        d_tx = after.tx_packets - before.tx_packets
        d_retry = after.retry_count - before.retry_count
        d_err = after.error_count - before.error_count
        if d_tx < 0 or d_retry < 0 or d_err < 0:  # reset: counting restarted from zero
            d_tx, d_retry, d_err = (
                after.tx_packets,
                after.retry_count,
                after.error_count,
            )
        if d_tx == 0:
            continue
        worst = max(worst, (d_retry + d_err) / d_tx)
    return worst
