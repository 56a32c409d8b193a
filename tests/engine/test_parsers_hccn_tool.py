"""hccn_tool parsers against real samples and source-format fixtures.

Provenance of every file: tests/data/ascend/SOURCES.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.parsers import ParseError
from engine.parsers import hccn_tool as h

DATA = Path(__file__).resolve().parents[1] / "data" / "ascend"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _stat(text: str) -> None:
    c = h.parse_stat(text)
    assert len(c) == 46
    assert list(c)[:3] == [
        "mac_tx_mac_pause_num",
        "mac_rx_mac_pause_num",
        "mac_tx_pfc_pkt_num",
    ]
    assert (
        c["roce_tx_err_pkt_num"],
        c["roce_new_pkt_rty_num"],
        c["mac_rx_bad_pkt_num"],
    ) == (5, 41, 7)
    assert c["nic_rx_all_oct_num"] == 482237805


def _optical(text: str) -> None:
    o = h.parse_optical(text)
    assert (o["present"], o["Tx Power"], o["Rx Power"], o["Rx LoL Flag"]) == (
        "present",
        "1.2035 mW",
        "1.0189 mW",
        "0x0",
    )


def _link_stat_devid(text: str) -> None:
    s = h.parse_link_stat(text)
    assert (s.device, s.up_count, s.down_count, s.current_time) == (
        0,
        2,
        1,
        "Tue Oct 28 21:46:46 2025",
    )
    assert s.records == [
        ("Sun Oct  5 10:13:51 2025", "UP"),
        ("Sun Oct  5 10:13:50 2025", "DOWN"),
        ("Sun Oct  5 10:13:35 2025", "UP"),
    ]


def _link_stat_device(text: str) -> None:
    s = h.parse_link_stat(text)
    assert (s.up_count, s.down_count, len(s.records)) == (
        2,
        None,
        3,
    )  # old format: no down count
    assert s.records[1] == ("Tue Jun  6 16:32:10 2023", "DOWN")


def _lldp(text: str) -> None:
    d = h.parse_lldp(text)
    assert (d["port_id_subtype"], d["port_id"]) == ("Ifname", "400GE1/1/20:2")
    assert d["chassis_id_subtype"] == "MAC"
    assert d["system_description"].splitlines() == [
        "Versatile Routing Platform Software",
        "VRP (R) software, Version 8.211 (DX511 V200R021C10SPC600)",
        "Huarong DX511",
    ]
    assert (d["system_capabilities"], d["management_address"]) == (
        "Enabled capabilities: Bridge, Router",
        "IPv4: 26.xx.xx.xx",
    )
    assert d["maximum_frame_size"] == "9216" and "end_of_lldpdu" not in d


def _ping(text: str) -> None:
    assert h.parse_ping(text) == h.PingResult(
        sent=3,
        received=3,
        loss_pct=0.0,
        target="29.1.137.205",
        rtt_ms=[1.418, 0.034, 0.04],
    )


SAMPLES: dict[str, Callable[[str], None]] = {
    "hccn_tool-link-g-up.txt": lambda t: _eq(h.parse_link(t), "UP"),
    "hccn_tool-net_health-g-init.txt": lambda t: _eq(h.parse_net_health(t), "Init"),
    "hccn_tool-stat-g-910b-SYNTHESISED.txt": _stat,
    "hccn_tool-optical-g-910b-SYNTHESISED.txt": _optical,
    "hccn_tool-link_stat-g-devid-format.txt": _link_stat_devid,
    "hccn_tool-link_stat-g-device-format.txt": _link_stat_device,
    "hccn_tool-ip-g-910b.txt": lambda t: _eq(
        h.parse_ip(t), h.IpInfo("29.1.112.213", "255.255.0.0")
    ),
    "hccn_tool-lldp-g-910b-redacted.txt": _lldp,
    "hccn_tool-ping-g-910b.txt": _ping,
    "hccn_tool-netdetect-g-doc.txt": lambda t: _eq(h.parse_netdetect(t), "11.12.165.1"),
    "hccn_tool-gateway-g-doc.txt": lambda t: _eq(
        h.parse_gateway(t), h.GatewayInfo("11.12.165.1", "eth0")
    ),
}
# Samples of commands the console does not read (yet); kept for reference only.
NOT_PARSED = {
    "hccn_tool-hw_stats-g-910b.txt",
    "hccn_tool-route-g-910b.txt",
    "hccn_tool-status-g-910b-elided.txt",
    "hccn_tool-tls-g-2dev.txt",
}


def _eq(actual: object, expected: object) -> None:
    assert actual == expected


@pytest.mark.parametrize(
    "sample", sorted(DATA.glob("hccn_tool-*.txt")), ids=lambda p: p.name
)
def test_it_parses_every_hccn_tool_sample(sample: Path) -> None:
    if sample.name in NOT_PARSED:
        assert sample.name not in SAMPLES
        return
    assert sample.name in SAMPLES, (
        f"{sample.name} has no expectation; add one or list it in NOT_PARSED"
    )
    SAMPLES[sample.name](sample.read_text(encoding="utf-8"))


def _mindcluster_sections() -> dict[str, str]:
    """Command → output of the MindCluster collection example (indented, elided)."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in read("mindcluster-faultdiag-hccn_tool-collection-example.txt").split(
        "\n"
    ):
        if "/hccn_tool -i 0 " in line:
            current = sections.setdefault(line.split("-i 0 ", 1)[1].strip(), [])
        elif line.strip():
            current.append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def test_it_parses_the_mindcluster_collection_sections() -> None:
    s = _mindcluster_sections()
    assert h.parse_net_health(s["-net_health -g"]) == "Init"
    assert h.parse_link(s["-link -g"]) == "UP"
    optical = h.parse_optical(s["-optical -g"])
    assert (optical["present"], optical["Rx Los Flag"], optical["Tx Bias"]) == (
        "not present",
        "0xff",
        "7.9360 mA",
    )
    stat = h.parse_stat(s["-stat -g"])
    assert (stat["mac_tx_pfc_pkt_num"], stat["nic_rx_all_pkg_num"], len(stat)) == (
        0,
        6414803,
        8,
    )
    assert h.parse_link_stat(s["-link_stat -g"]).up_count == 2
    with pytest.raises(
        ParseError, match="not an IPv4 address"
    ):  # the doc redacted it to 10.xx.xx.10
        h.parse_ip(s["-ip -g"])


@pytest.mark.parametrize("state", h.NET_HEALTH_STATES)
def test_it_accepts_every_net_health_state_of_the_source(state: str) -> None:
    assert h.parse_net_health(f"net health status: {state}\n") == state


def test_it_reads_link_down() -> None:
    assert h.parse_link("link status: DOWN\n") == "DOWN"


def test_it_reads_a_lossy_ping() -> None:
    text = (
        "device 0 PING 10.20.0.20\n"
        "recv seq=1,time=0.061000ms\n"
        "3 packets transmitted, 1 received, 66.67% packet loss\n"
    )
    r = h.parse_ping(text)
    assert (r.sent, r.received, r.loss_pct) == (3, 1, 66.67)


def test_it_names_the_bad_stat_line() -> None:
    text = read("hccn_tool-stat-g-910b-SYNTHESISED.txt").replace(
        "roce_tx_err_pkt_num:5", "roce_tx_err_pkt_num: five"
    )
    with pytest.raises(ParseError) as exc:
        h.parse_stat(text)
    assert exc.value.line == 35 and "roce_tx_err_pkt_num" in str(exc.value)


def test_it_rejects_an_unknown_link_state() -> None:
    with pytest.raises(ParseError, match="unknown link status 'FLAPPING'") as exc:
        h.parse_link("link status: FLAPPING\n")
    assert exc.value.line == 1


def test_it_rejects_a_ping_without_summary() -> None:
    with pytest.raises(ParseError, match="no 'packets transmitted' summary"):
        h.parse_ping("device 3 PING 29.1.137.205\nrecv seq=0,time=1.418000ms\n")


PARSERS: list[Callable[[str], object]] = [
    h.parse_link,
    h.parse_net_health,
    h.parse_stat,
    h.parse_link_stat,
    h.parse_ip,
    h.parse_lldp,
    h.parse_optical,
    h.parse_netdetect,
    h.parse_gateway,
    h.parse_ping,
]


@pytest.mark.parametrize("parse", PARSERS, ids=lambda f: f.__name__)
def test_it_rejects_garbage_hccn_tool_output(parse: Callable[[str], object]) -> None:
    for garbage in (
        "",
        "...\n",
        "hccn_tool: error while loading shared libraries\nexit 1\n",
    ):
        with pytest.raises(ParseError):
            parse(garbage)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_it_never_crashes_on_arbitrary_hccn_text(text: str) -> None:
    for parse in PARSERS:
        try:
            parse(text)
        except ParseError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(SAMPLES)), st.data())
def test_it_never_crashes_on_a_mutated_sample(name: str, data: st.DataObject) -> None:
    lines = read(name).split("\n")
    index = data.draw(st.integers(0, len(lines) - 1))
    lines[index] = data.draw(st.text(max_size=80))
    for parse in PARSERS:
        try:
            parse("\n".join(lines))
        except ParseError:
            pass
