"""npu-smi -t topo / -t hccs-bw / watch parsers against published output (tests/data/ascend/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.parsers import ParseError, Unsupported
from engine.parsers.npu_smi_links import (
    WatchParser,
    parse_hccs_bw,
    parse_topo,
    parse_watch,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "ascend"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name",
    ["npu-smi-info-t-topo-910b3-8card.txt", "npu-smi-info-t-topo-910b1-8card.txt"],
)
def test_topo_of_an_8_npu_a2_is_a_full_hccs_mesh(name: str) -> None:
    topo = parse_topo(read(name))
    assert topo.npus == list(range(8))
    assert topo.kind(0, 0) == "X" and topo.kind(3, 5) == "HCCS"
    assert topo.hccs_peers(2) == [0, 1, 3, 4, 5, 6, 7]
    assert topo.cpu_affinity[0] == "144-167"


def test_topo_keeps_the_cpu_affinity_of_each_row() -> None:
    topo = parse_topo(read("npu-smi-info-t-topo-910b3-8card.txt"))
    assert topo.cpu_affinity == [
        "144-167",
        "144-167",
        "96-119",
        "96-119",
        "0-23",
        "0-23",
        "48-71",
        "48-71",
    ]


def test_topo_names_a_bad_row() -> None:
    text = read("npu-smi-info-t-topo-910b3-8card.txt").replace(
        "NPU3       HCCS", "NPU3       WIRE", 1
    )
    with pytest.raises(ParseError) as exc:
        parse_topo(text)
    assert exc.value.line == 5


def test_hccs_bw_reads_each_link_and_the_total() -> None:
    bw = parse_hccs_bw(read("npu-smi-info-t-hccs-bw-i0-c0-910b-SYNTHESISED.txt"))
    assert [link.link for link in bw.links] == [1, 2, 3, 4, 5, 6, 7]
    assert bw.links[0].tx_gbps == 12.5 and bw.links[2].rx_gbps == 0.0
    assert bw.total_tx_gbps == pytest.approx(73.0)


def test_hccs_bw_on_an_old_driver_is_unsupported() -> None:
    with pytest.raises(Unsupported):
        parse_hccs_bw(
            read("npu-smi-info-t-hccs-unsupported-old-driver-SYNTHESISED.txt")
        )


def test_hccs_bw_without_total_is_refused() -> None:
    text = "\n".join(
        read("npu-smi-info-t-hccs-bw-i0-c0-910b-SYNTHESISED.txt").splitlines()[:-1]
    )
    with pytest.raises(ParseError, match="total"):
        parse_hccs_bw(text)


def test_watch_910b3_stream_with_markdown_indent_and_trailing_spaces() -> None:
    rows = parse_watch(read("npu-smi-info-watch-i2-910b3.txt"))
    assert len(rows) >= 10
    assert rows[0].npu == 2 and rows[0].chip == 0
    assert rows[0].values["Pwr(W)"] == 90.1 and rows[0].values["Memory BW(%)"] == 0
    assert rows[10].values["Ctrl Cpu(%)"] == 16


def test_watch_950_has_no_chip_column_and_npu_util() -> None:
    rows = parse_watch(read("npu-smi-info-watch-950-doc-example.txt"))
    assert [r.npu for r in rows] == list(range(8))
    assert rows[0].chip is None and rows[0].values["NPU Util(%)"] == 0
    assert rows[1].values["Pwr(W)"] == 292.1


def test_watch_stream_fed_line_by_line_reads_a3_dash_power() -> None:
    parser = WatchParser()
    header = "NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)  AI Cpu(%)   Ctrl Cpu(%) Memory(%)   Memory BW(%)"
    assert parser.feed(header) is None
    row = parser.feed(
        "0           1           -           40          0           0           2           5           0           "
    )
    assert row is not None and row.chip == 1 and row.values["Pwr(W)"] is None
    with pytest.raises(ParseError, match="values"):
        parser.feed("0  1  2")
