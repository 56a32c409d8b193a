"""A RoCE failover verdict that can fail: switched, not switched, cannot verify."""

from __future__ import annotations

from typing import Any

from engine.link_verify import (
    CANNOT_VERIFY,
    NOT_RECOVERED,
    NOT_SWITCHED,
    RECOVERED,
    SWITCHED,
    failing_links,
    verify_link_switch,
    verify_links_recovered,
)


def sample(
    t: float, hccs_tx: int | None, roce_tx: int, *, unsupported=False
) -> dict[str, Any]:
    """One collect() sample: 8 NPUs x 7 links carrying hccs_tx each, RoCE roce_tx each."""
    hccs = []
    if hccs_tx is not None and not unsupported:
        hccs = [
            {
                "npu": npu,
                "chip": 0,
                "health": "OK",
                "links": [
                    {
                        "index": i,
                        "tx_packets": hccs_tx,
                        "rx_packets": hccs_tx,
                        "retry_count": 0,
                        "error_count": 0,
                    }
                    for i in range(7)
                ],
            }
            for npu in range(8)
        ]
    return {
        "collected_at": t,
        "hccs": hccs,
        "hccs_unsupported": unsupported,
        "roce": [
            {"npu": n, "stat": {"roce_tx_all_pkt_num": roce_tx}} for n in range(8)
        ],
    }


def window(t0, t1, h0, h1, r0, r1, **kw):
    return (sample(t0, h0, r0, **kw), sample(t1, h1, r1, **kw))


BEFORE = window(
    0, 10, 0, 10_000_000, 0, 2_000_000
)  # HCCS busy, RoCE inter-node traffic
PEER_BUSY = window(20, 30, 0, 10_000_000, 0, 2_000_000)


def test_switched_when_hccs_stops_and_traffic_continues() -> None:
    after = window(20, 30, 10_000_000, 10_000_000, 2_000_000, 14_000_000)
    verdict = verify_link_switch(BEFORE, after, [PEER_BUSY])
    assert verdict.status == SWITCHED and verdict.ok
    assert verdict.evidence["hccs_pps_after"] == 0


def test_not_switched_when_hccs_keeps_its_traffic_though_roce_grows() -> None:
    # the 800T A2 case: RoCE grows anyway (EP all-to-all between servers)
    after = window(20, 30, 10_000_000, 19_500_000, 2_000_000, 4_000_000)
    verdict = verify_link_switch(BEFORE, after, [PEER_BUSY])
    assert verdict.status == NOT_SWITCHED and not verdict.ok
    assert "95 %" in verdict.reason


def test_unsupported_counters_cannot_verify_and_do_not_pass() -> None:
    before = window(0, 10, None, None, 0, 2_000_000, unsupported=True)
    after = window(20, 30, None, None, 2_000_000, 14_000_000, unsupported=True)
    verdict = verify_link_switch(before, after, [PEER_BUSY])
    assert verdict.status == CANNOT_VERIFY and not verdict.ok
    assert "unsupported" in verdict.reason


def test_empty_hccs_samples_cannot_verify() -> None:
    # today's bug: an empty list summed to 0 before and after read as "switched"
    before = (sample(0, None, 0), sample(10, None, 2_000_000))
    after = (sample(20, None, 2_000_000), sample(30, None, 14_000_000))
    verdict = verify_link_switch(before, after, [PEER_BUSY])
    assert verdict.status == CANNOT_VERIFY and not verdict.ok


def test_no_traffic_before_the_change_cannot_verify() -> None:
    idle = window(0, 10, 5, 5, 0, 0)
    after = window(20, 30, 5, 5, 0, 0)
    verdict = verify_link_switch(idle, after, [])
    assert verdict.status == CANNOT_VERIFY and "no traffic" in verdict.reason


def test_no_traffic_after_the_change_cannot_verify() -> None:
    after = window(20, 30, 10_000_000, 10_000_000, 2_000_000, 2_000_000)
    idle_peer = window(20, 30, 7, 7, 9, 9)
    verdict = verify_link_switch(BEFORE, after, [idle_peer])
    assert verdict.status == CANNOT_VERIFY and "no traffic after" in verdict.reason


def test_hccs_bandwidth_alone_can_show_a_failed_switch() -> None:
    before = window(0, 10, None, None, 0, 2_000_000, unsupported=True)
    after = list(window(20, 30, None, None, 0, 2_000_000, unsupported=True))
    after[1]["hccs_bw"] = [{"npu": 0, "chip": 0, "links": [{"tx_gbps": 12.5}]}]
    verdict = verify_link_switch(before, tuple(after), [])
    assert verdict.status == NOT_SWITCHED


def lossy(t: float, tx: int, bad: int) -> dict[str, Any]:
    s = sample(t, tx, 0)
    s["hccs"][3]["links"][2]["retry_count"] = bad
    return s


def test_failing_links_names_the_lossy_link() -> None:
    w = (lossy(0, 0, 0), lossy(10, 1_000_000, 200_000))
    assert failing_links(w, 15.0) == [(3, 0, 2)]
    assert failing_links((sample(0, 0, 0), sample(10, 1_000, 0)), 15.0) == []


def test_readmit_checks_the_links_that_failed() -> None:
    failed = [(3, 0, 2)]
    healthy = (lossy(0, 0, 0), lossy(10, 1_000_000, 10))
    assert verify_links_recovered(healthy, failed, 15.0).status == RECOVERED
    still = (lossy(0, 0, 0), lossy(10, 1_000_000, 300_000))
    assert verify_links_recovered(still, failed, 15.0).status == NOT_RECOVERED
    idle = (lossy(0, 5, 0), lossy(10, 5, 0))
    assert verify_links_recovered(idle, failed, 15.0).status == CANNOT_VERIFY
    gone = (sample(0, None, 0, unsupported=True), sample(10, None, 0, unsupported=True))
    verdict = verify_links_recovered(gone, failed, 15.0)
    assert verdict.status == CANNOT_VERIFY and not verdict.ok
