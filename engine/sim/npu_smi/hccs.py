"""The HCCS types of the fake ``npu-smi``: ``info -t hccs`` (per link or ``-lane``) and ``-t hccs-bw``.

Separate from the other per-card types because they read the HCCS counters and the
engine's link mode, follow the driver source rather than a capture (no real sample
exists), and take options of their own.
"""

from __future__ import annotations

from engine.sim import hardware
from engine.sim.npu_smi.node import Node, kv


def _arr(values: list[int]) -> str:
    return "[" + "".join(f"{v:<20} " for v in values) + "]"


def t_hccs(
    node: Node, npu: int, chip: int | None, lane: int | None = None
) -> list[str]:
    """``-t hccs -i N -c C`` (print_npu_hccs_lane: keys carry a trailing space, 7 links)."""
    links = hardware.hccs_links(node.counters, npu)
    n = hardware.HCCS_LINKS
    if lane is not None:

        def one(
            key: str, v: int
        ) -> str:  # print_npu_single_hccs_lane: one "[%-20llu]" value
            return f"\t{key:<30} : [{v:<20}]"

        return [
            kv("hccs health status ", "OK"),
            one("hccs lane mode ", 4),
            f"\t{'hccs link lane list ':<30} : [1111{'':16}]",
            one("hccs link speed ", 4 * 56),
            one("hccs tx packets ", links.tx[lane]),
            one("hccs tx bytes ", links.tx[lane] * hardware.HCCS_PACKET_BYTES),
            one("hccs rx packets ", links.rx[lane]),
            one("hccs rx bytes ", links.rx[lane] * hardware.HCCS_PACKET_BYTES),
            one("hccs retry count ", links.retry[lane]),
            one("hccs error count ", links.crc[lane]),
            kv("hccs first error lane ", "NA"),
        ]
    return [
        kv("hccs health status ", "OK"),
        f"\t{'hccs lane mode ':<30} : " + _arr([4] * n),
        f"\t{'hccs link lane list ':<30} : ["
        + "".join(f"1111{'':16} " for _ in range(n))
        + "]",
        f"\t{'hccs link speed ':<30} : " + _arr([4 * 56] * n),
        f"\t{'hccs tx packets ':<30} : " + _arr(links.tx),
        f"\t{'hccs tx bytes ':<30} : "
        + _arr([x * hardware.HCCS_PACKET_BYTES for x in links.tx]),
        f"\t{'hccs rx packets ':<30} : " + _arr(links.rx),
        f"\t{'hccs rx bytes ':<30} : "
        + _arr([x * hardware.HCCS_PACKET_BYTES for x in links.rx]),
        f"\t{'hccs retry count ':<30} : " + _arr(links.retry),
        f"\t{'hccs error count ':<30} : " + _arr(links.crc),
        kv("hccs first error lane ", "NA"),
    ]


def t_hccs_bw(node: Node, npu: int, chip: int) -> list[str]:
    """``-t hccs-bw -i N -c C`` (printf_hccs_bandwidth_info: PCS 1..7, then total).

    GB/s over the last counter interval: the engine's HCCS load on each link.
    """
    links = hardware.hccs_links(node.counters, npu)
    load = (
        float(node.engine.get("load", 0.0))
        if node.engine.get("phase") == "ready"
        else 0.0
    )
    on_hccs = hardware.hccs_carries_traffic(
        node.cfg, str(node.engine.get("link_mode", "hccs"))
    )
    per_link = (
        hardware.HCCS_LINK_PPS * hardware.HCCS_PACKET_BYTES * load / 1e9
        if on_hccs
        else 0.0
    )
    out = [f"{'hccs link':<30} {'tx_bandwidth(GB/S)':<30} {'rx_bandwidth(GB/S)':<30}"]
    for i in range(len(links.tx)):
        out.append(f"{i + 1:<35d} {per_link:<30.6f} {per_link:<30.6f}")
    total = per_link * len(links.tx)
    out.append(f"{'total':<35} {total:<30.6f} {total:<30.6f}")
    return out
