"""npu-smi parsers against the real samples in tests/data/ascend (see SOURCES.md)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.parsers import ParseError, Unsupported
from engine.parsers import npu_smi as n

DATA = Path(__file__).resolve().parents[1] / "data" / "ascend"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# -- npu-smi info table -------------------------------------------------------------


def _check_910b1_elided(info: n.NpuSmiInfo) -> None:
    assert info.version == "23.0.rc2"
    assert [c.npu for c in info.chips] == [
        0,
        1,
        7,
    ]  # the "..." rows are skipped, not invented
    assert info.chips[2].hbm_used_mb == 4174 and info.chips[2].hbm_total_mb == 65536
    assert info.chips[1].power_w == 92.1 and info.chips[1].bus_id == "0000:01:00.0"
    assert info.processes == []


def _check_910b2_idle(info: n.NpuSmiInfo) -> None:
    assert info.version == "25.2.0"
    assert len(info.chips) == 8 and {c.name for c in info.chips} == {"910B2"}
    npu5 = info.chips[5]
    assert (npu5.npu, npu5.power_w, npu5.temp_c) == (5, 102.2, 50.0)
    assert (
        npu5.hbm_used_mb,
        npu5.hbm_total_mb,
        npu5.ddr_used_mb,
        npu5.ddr_total_mb,
    ) == (3387, 65536, 0, 0)
    assert info.chips[0].hbm_used_mb == 3418
    assert info.processes == []


def _check_910b3_procs(info: n.NpuSmiInfo) -> None:
    assert len(info.chips) == 8
    assert {c.hbm_used_mb for c in info.chips} == {
        58626,
        58627,
    }  # "58626/ 65536": no space before '/'
    assert info.chips[2].hbm_used_mb == 58627 and info.chips[4].temp_c == 44.0
    assert [p.pid for p in info.processes] == list(range(71867, 71875))
    assert {p.name for p in info.processes} == {
        ""
    }  # containerised vLLM workers have no name
    assert {p.memory_mb for p in info.processes} == {55278}
    assert info.processes[7].npu == 7 and info.processes[7].container_pid is None


def _check_910b4_wide(info: n.NpuSmiInfo) -> None:
    assert info.version == "26.0.rc1"
    (chip,) = info.chips
    assert (chip.name, chip.power_w, chip.temp_c) == ("910B4", 82.6, 32.0)
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (2871, 32768)
    assert info.processes == []


def _check_a3(info: n.NpuSmiInfo) -> None:
    assert len(info.chips) == 16
    assert [(c.npu, c.chip) for c in info.chips[:4]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [c.phy_id for c in info.chips] == list(range(16))
    assert info.chips[0].power_w == 211.3
    assert all(
        c.power_w is None for c in info.chips if c.chip == 1
    )  # second die prints "-"
    last = info.chips[15]
    assert (last.npu, last.bus_id, last.hbm_used_mb, last.aicore_pct) == (
        7,
        "0000:83:00.0",
        61631,
        7.0,
    )
    assert len(info.processes) == 23  # 9 rows on NPU 0, 2 on each of the others
    assert [p.pid for p in info.processes if p.npu == 0 and p.chip == 1] == [929405]
    assert info.processes[-1].memory_mb == 58782


def _check_310p(info: n.NpuSmiInfo) -> None:
    assert info.version == "25.0.rc1.b033"
    assert len(info.chips) == 8 and sorted({c.npu for c in info.chips}) == [1, 2, 4, 5]
    critical = [c for c in info.chips if c.health == "Critical"]
    assert [(c.npu, c.chip, c.device_id) for c in critical] == [(4, 0, 4)]
    assert all(
        c.hbm_used_mb is None and c.hbm_total_mb is None for c in info.chips
    )  # no HBM column
    assert all(c.power_w is None for c in info.chips)  # power "NA"
    assert (critical[0].ddr_used_mb, critical[0].ddr_total_mb, critical[0].temp_c) == (
        1793,
        44280,
        56.0,
    )
    assert (
        info.chips[0].bus_id == info.chips[1].bus_id == "0000:01:00.0"
    )  # one Duo card, two chips
    assert info.processes == []


def _info_raises(info_text: str) -> None:
    with pytest.raises((ParseError, Unsupported)):
        n.parse_info(info_text)


INFO_TABLES: dict[str, Callable[[n.NpuSmiInfo], None]] = {
    "npu-smi-info-910b1-8card-elided-23.0.rc2.txt": _check_910b1_elided,
    "npu-smi-info-910b2-8card-idle-25.2.0.txt": _check_910b2_idle,
    "npu-smi-info-910b3-8card-procs-25.3.rc1.txt": _check_910b3_procs,
    "npu-smi-info-910b4-1card-26.0.rc1-wide-layout.txt": _check_910b4_wide,
    "npu-smi-info-a3-ascend910-8npu-16chip-procs-25.2.0.txt": _check_a3,
    "npu-smi-info-300i-duo-310p3-4card-8chip-critical-25.0.rc1.txt": _check_310p,
}


def _check_usages_2551(text: str) -> None:
    (u,) = n.parse_usages(text)
    assert (u.npu_id, u.chip_id, u.hbm_capacity_mb, u.hbm_usage_pct, u.ctrlcpu_pct) == (
        0,
        0,
        65536,
        5.0,
        6.0,
    )
    assert u.npu_util_pct == 0.0 and u.aicube_pct == 0.0


def _check_usages_230(text: str) -> None:
    (u,) = n.parse_usages(text)
    assert (u.hbm_capacity_mb, u.hbm_usage_pct, u.aicore_pct) == (65536, 4.0, 0.0)
    assert (
        u.npu_util_pct is None and u.aicube_pct is None
    )  # 23.0 does not print these keys


def _check_temp(text: str) -> None:
    (t,) = n.parse_temp(text)
    assert (t.npu_id, t.chip_id, t.temp_c) == (0, 0, 39.0)
    assert t.sensors == {"LM75A_TE (C)": 36.0, "LM75B_TE (C)": 36.0}


def _check_power(text: str) -> None:
    assert n.parse_power(text) == [
        n.ChipPower(npu_id=0, chip_id=0, power_w=103.5, rated_power_w=None)
    ]


def _check_memory(text: str) -> None:
    m = n.parse_memory(text)
    assert (
        m.hbm_capacity_mb,
        m.hbm_clock_mhz,
        m.hbm_temp_c,
        m.hbm_manufacturer_id,
    ) == (65536, 1600, 46.0, "0x57")
    assert m.ddr_capacity_mb == 0


def _check_board(text: str) -> None:
    b = n.parse_board(text)
    assert (b.npu_id, b.software_version, b.firmware_version) == (
        0,
        "25.5.1",
        "7.8.0.6.201",
    )
    assert (b.product_name, b.bus_info, b.device_id, b.chip_count) == (
        "IT21HMDC_Bin5",
        "0000:C1:00.0",
        "0xD802",
        1,
    )
    assert b.chip_name is None


def _check_common(text: str) -> None:
    blocks = n.parse_kv(text)
    assert blocks[0] == {"NPU ID": "1", "Chip Count": "1"}
    assert (
        blocks[1]["Aicore Freq(MHZ)"] == "1800"
        and blocks[1]["NPU Real-time Power(W)"] == "93.4"
    )
    assert blocks[2] == {"Chip Name": "mcu", "Temperature(C)": "38"}


def _check_list(text: str) -> None:
    entries = n.parse_list(text)
    assert [(e.npu_id, e.chip_count) for e in entries] == [(i, 1) for i in range(8)]


def _check_mapping(text: str) -> None:
    rows = n.parse_mapping(text)
    assert [(r.npu_id, r.chip_id, r.logic_id) for r in rows] == [
        (i, 0, i) for i in range(8)
    ]
    assert {r.name for r in rows} == {"Ascend 910B4"}  # Mcu rows dropped


def _check_health_ok(text: str) -> None:
    assert n.parse_health(text) == n.HealthInfo(
        health="OK", error_codes=[], error_information=None
    )


def _check_health_alarm(text: str) -> None:
    h = n.parse_health(text)
    assert (h.health, h.error_codes) == ("Alarm", ["80E01801"])


def _check_hccs_ok(text: str) -> None:
    s = n.parse_hccs(text)
    assert s.health == "OK" and s.first_error_lane is None
    assert len(s.links) == 7  # PCS 1..7 on 910B
    assert {(x.lane_mode, x.speed, x.lane_list) for x in s.links} == {(4, 224, "1111")}
    assert (
        s.links[0].tx_packets == 1843920561 and s.links[0].tx_bytes == 1843920561 * 20
    )
    assert s.links[6].retry_count == 8 and {x.error_count for x in s.links} == {0}


def _check_hccs_nok(text: str) -> None:
    s = n.parse_hccs(text)
    assert (s.health, s.first_error_lane) == ("NOK", "4")
    bad = s.links[3]
    assert (bad.lane_mode, bad.speed, bad.lane_list, bad.error_count) == (
        2,
        112,
        "1100",
        20000,
    )


def _check_hccs_unsupp(text: str) -> None:
    with pytest.raises(Unsupported, match="Error parameter of -t"):
        n.parse_hccs(text)


def _check_help_is_unsupported(text: str) -> None:
    with pytest.raises(Unsupported):
        n.parse_hccs(text)
    with pytest.raises(Unsupported):
        n.parse_info(text)


def _check_hccs_bw(text: str) -> None:
    from engine.parsers.npu_smi_links import parse_hccs_bw

    bw = parse_hccs_bw(text)
    assert len(bw.links) == 7 and bw.total_rx_gbps > 0
    _info_raises(text)


OTHER_SAMPLES: dict[str, Callable[[str], None]] = {
    "npu-smi-info-t-usages-i0-910b-25.5.1.txt": _check_usages_2551,
    "npu-smi-info-t-usages-i0-910b1.txt": _check_usages_230,
    "npu-smi-info-t-temp-i0-910b-25.5.1.txt": _check_temp,
    "npu-smi-info-t-power-i0-910b-25.5.1.txt": _check_power,
    "npu-smi-info-t-memory-i1-c0-910b.txt": _check_memory,
    "npu-smi-info-t-board-i0-910b-25.5.1.txt": _check_board,
    "npu-smi-info-t-common-i1-910b1.txt": _check_common,
    "npu-smi-info-l-910b-8card-25.5.1.txt": _check_list,
    "npu-smi-info-m-910b4-8card.txt": _check_mapping,
    "npu-smi-info-t-health-i0-c0-ok.txt": _check_health_ok,
    "npu-smi-info-t-health-i0-c0-alarm-SYNTHESISED.txt": _check_health_alarm,
    "npu-smi-info-t-hccs-i0-c0-910b-ok-SYNTHESISED.txt": _check_hccs_ok,
    "npu-smi-info-t-hccs-i0-c0-910b-nok-SYNTHESISED.txt": _check_hccs_nok,
    "npu-smi-info-t-hccs-unsupported-old-driver-SYNTHESISED.txt": _check_hccs_unsupp,
    "npu-smi-info-h-help-23.0.rc2.txt": _check_help_is_unsupported,
    "npu-smi-info-t-hccs-bw-i0-c0-910b-SYNTHESISED.txt": _check_hccs_bw,
    # not tables: parse_info must refuse them rather than misread them
    "npu-smi-info-t-topo-910b1-8card.txt": _info_raises,
    "npu-smi-info-t-topo-910b3-8card.txt": _info_raises,
    "npu-smi-info-watch-i2-910b3.txt": _info_raises,
    "npu-smi-info-watch-950-doc-example.txt": _info_raises,
}


@pytest.mark.parametrize(
    "sample", sorted(DATA.glob("npu-smi-info-*.txt")), ids=lambda p: p.name
)
def test_it_parses_every_npu_smi_sample(sample: Path) -> None:
    text = sample.read_text(encoding="utf-8")
    if sample.name in INFO_TABLES:
        INFO_TABLES[sample.name](n.parse_info(text))
    else:
        assert sample.name in OTHER_SAMPLES, (
            f"{sample.name} has no expectation; add one"
        )
        OTHER_SAMPLES[sample.name](text)


@pytest.mark.parametrize("name", sorted(INFO_TABLES))
def test_it_tolerates_markdown_indentation(name: str) -> None:
    text = read(name)
    indented = "\n".join("   " + line if line else line for line in text.split("\n"))
    assert n.parse_info(indented) == n.parse_info(text)


def test_it_parses_the_table_inside_the_mindcluster_example() -> None:
    lines = read("mindcluster-faultdiag-npu-smi-collection-example.txt").split("\n")
    table = "\n".join(
        lines[1 : lines.index("")]
    )  # after the command line, up to the first blank
    info = n.parse_info(table)
    assert info.version == "23.0.5"
    assert [(c.npu, c.name, c.ddr_used_mb, c.ddr_total_mb) for c in info.chips] == [
        (0, "xxx", 920, 13553),
        (7, "xxx", 2346, 15567),
    ]
    assert (info.chips[1].hbm_used_mb, info.chips[1].hbm_total_mb) == (0, 32768)


def test_it_reads_the_container_pid_column_of_the_wide_layout() -> None:
    text = read("npu-smi-info-910b4-1card-26.0.rc1-wide-layout.txt")
    idle = next(line for line in text.split("\n") if "No running" in line)
    text = text.replace(
        idle,
        "| 0       0                 | 485946        | pytest             "
        "| 5175                  | NA                      |\n"
        "| 0       0                 | 485947        | python             "
        "| 2048                  | 311                     |",
    )
    procs = n.parse_info(text).processes
    assert [(p.pid, p.name, p.memory_mb, p.container_pid) for p in procs] == [
        (485946, "pytest", 5175, None),
        (485947, "python", 2048, 311),
    ]


def test_it_ignores_the_driver_warning_line() -> None:
    text = read("npu-smi-info-910b2-8card-idle-25.2.0.txt") + (
        "[WARNING]The driver package may not be completely installed, "
        "which may cause function abnormal."
        " Please reinstall it.\n"
    )
    assert len(n.parse_info(text).chips) == 8


def test_it_names_the_line_of_a_bad_value() -> None:
    lines = read("npu-smi-info-910b2-8card-idle-25.2.0.txt").split("\n")
    lines[6] = lines[6].replace("94.2 ", "9x.2 ")
    with pytest.raises(ParseError) as exc:
        n.parse_info("\n".join(lines))
    assert exc.value.line == 7
    assert "line 7" in str(exc.value) and "9x.2" in str(exc.value)


def test_it_rejects_an_unknown_health_state() -> None:
    text = read("npu-smi-info-910b2-8card-idle-25.2.0.txt").replace(
        "| OK            | 97.5", "| Broken        | 97.5"
    )
    with pytest.raises(ParseError, match="unknown health state 'Broken'"):
        n.parse_info(text)


def test_it_rejects_a_chip_row_without_its_second_line() -> None:
    lines = read("npu-smi-info-910b2-8card-idle-25.2.0.txt").split("\n")
    del lines[7]  # NPU 0's "Chip | Bus-Id | AICore ..." row
    with pytest.raises(ParseError) as exc:
        n.parse_info("\n".join(lines))
    assert exc.value.line == 7


def test_it_rejects_garbage_npu_smi_info() -> None:
    with pytest.raises(ParseError):
        n.parse_info("command not found: npu-smi\n")
    with pytest.raises(ParseError, match="empty"):
        n.parse_info("")


def test_it_reports_unsupported_proc_query() -> None:
    with pytest.raises(Unsupported):
        n.parse_info("This device does not support querying proc info.\n")


def test_it_serialises_chips_in_the_documented_key_order() -> None:
    d = n.parse_info(read("npu-smi-info-910b3-8card-procs-25.3.rc1.txt")).to_dict()
    assert list(d["chips"][0])[:10] == [
        "npu", "chip", "name", "health", "power_w", "temp_c",
        "aicore_pct", "hbm_used_mb", "hbm_total_mb", "bus_id",
    ]  # fmt: skip
    assert d["processes"][0] == {
        "npu": 0,
        "chip": 0,
        "pid": 71867,
        "name": "",
        "memory_mb": 55278,
        "container_pid": None,
    }


def test_it_pickles_parse_errors_for_celery() -> None:
    err = ParseError("bad value", raw="a\nb\n", line=2)
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.line, clone.line_text, str(clone)) == (2, "b", str(err))


# -- key : value ---------------------------------------------------------------------


def test_it_keeps_chip_id_with_the_values_above_it() -> None:
    blocks = n.parse_kv(read("npu-smi-info-t-usages-i0-910b-25.5.1.txt"))
    assert len(blocks) == 2
    assert blocks[1]["HBM Usage Rate(%)"] == "5" and blocks[1]["Chip ID"] == "0"


def test_it_reads_two_chips_of_an_a3_usages_output() -> None:
    text = (
        "\tNPU ID                         : 3\n"
        "\tChip Count                     : 2\n\n"
        "\tHBM Capacity(MB)               : 65536\n"
        "\tHBM Usage Rate(%)              : 94\n"
        "\tAicore Usage Rate(%)           : 7\n"
        "\tChip ID                        : 0\n\n"
        "\tHBM Capacity(MB)               : 65536\n"
        "\tHBM Usage Rate(%)              : 93\n"
        "\tAicore Usage Rate(%)           : 8\n"
        "\tChip ID                        : 1\n"
    )
    usages = n.parse_usages(text)
    assert [(u.npu_id, u.chip_id, u.hbm_usage_pct, u.aicore_pct) for u in usages] == [
        (3, 0, 94.0, 7.0),
        (3, 1, 93.0, 8.0),
    ]


def test_it_rejects_a_chip_count_mismatch() -> None:
    text = read("npu-smi-info-t-usages-i0-910b1.txt").replace(
        "Chip Count                     : 1", "Chip Count                     : 2"
    )
    with pytest.raises(ParseError, match="'Chip Count' says 2"):
        n.parse_usages(text)


def test_it_names_a_non_numeric_usage_value() -> None:
    text = read("npu-smi-info-t-usages-i0-910b1.txt").replace(
        "HBM Usage Rate(%)              : 4", "HBM Usage Rate(%)              : four"
    )
    with pytest.raises(ParseError) as exc:
        n.parse_usages(text)
    assert exc.value.line == 9 and "HBM Usage Rate(%)" in str(exc.value)


def test_it_accepts_the_single_space_health_indent() -> None:
    text = (
        " Health Status                  : Warning\n"
        " Error Code                     : 80CB8009 80E01801\n"
        " Error Information              : NA\n"
    )
    h = n.parse_health(text)
    assert (h.health, h.error_codes, h.error_information) == (
        "Warning",
        ["80CB8009", "80E01801"],
        None,
    )


@pytest.mark.parametrize(
    "parse",
    [
        n.parse_kv,
        n.parse_usages,
        n.parse_temp,
        n.parse_power,
        n.parse_memory,
        n.parse_board,
        n.parse_health,
        n.parse_list,
        n.parse_mapping,
        n.parse_hccs,
    ],  # fmt: skip
)
def test_it_rejects_garbage_key_value_output(parse: Callable[[str], object]) -> None:
    with pytest.raises(ParseError):
        parse("dcmi module initialize failed. ret is -8005\nsegmentation fault\n")


# -- hccs ----------------------------------------------------------------------------


def _status(tx: int, retry: int, err: int, links: int = 7) -> n.HccsStatus:
    link = n.HccsLink(0, 4, 224, tx, tx * 20, tx, tx * 20, retry, err)
    return n.HccsStatus(health="OK", links=[link] * links)


def test_it_computes_hccs_loss_of_the_worst_link() -> None:
    ok = n.parse_hccs(read("npu-smi-info-t-hccs-i0-c0-910b-ok-SYNTHESISED.txt"))
    nok = n.parse_hccs(read("npu-smi-info-t-hccs-i0-c0-910b-nok-SYNTHESISED.txt"))
    assert n.hccs_loss(ok, nok) == pytest.approx(0.17)
    assert n.hccs_loss(ok, ok) == 0.0


def test_it_treats_an_idle_link_as_lossless() -> None:
    assert n.hccs_loss(_status(1000, 5, 1), _status(1000, 9, 3)) == 0.0


def test_it_treats_a_counter_reset_as_a_fresh_delta() -> None:
    assert n.hccs_loss(
        _status(10_000_000, 500, 0), _status(2000, 100, 0)
    ) == pytest.approx(0.05)


def test_it_refuses_to_compare_different_link_sets() -> None:
    with pytest.raises(ValueError, match="7 and 1 links"):
        n.hccs_loss(_status(1, 0, 0), _status(1, 0, 0, links=1))


def test_it_parses_a_single_lane_query() -> None:
    text = (
        "\thccs health status             : OK\n"
        "\thccs lane mode                 : [4                   ]\n"
        "\thccs link lane list            : [1111                ]\n"
        "\thccs link speed                : [224                 ]\n"
        "\thccs tx packets                : [5000                ]\n"
        "\thccs tx bytes                  : [100000              ]\n"
        "\thccs rx packets                : [4000                ]\n"
        "\thccs rx bytes                  : [80000               ]\n"
        "\thccs retry count               : [3                   ]\n"
        "\thccs error count               : [1                   ]\n"
        "\thccs first error lane          : NA\n"
    )
    (link,) = n.parse_hccs(text).links
    assert (link.tx_packets, link.rx_packets, link.retry_count, link.error_count) == (
        5000,
        4000,
        3,
        1,
    )


def test_it_parses_310p_hccs_without_health() -> None:
    arr = "[" + "".join(f"{v:<20} " for v in (10, 20)) + "]"
    text = "".join(
        f"\t{key + ' ':<30} : {arr}\n"
        for key in (
            "hccs tx packets",
            "hccs tx bytes",
            "hccs rx packets",
            "hccs rx bytes",
            "hccs retry count",
            "hccs error count",
        )
    )
    s = n.parse_hccs(text)
    assert s.health is None and [x.lane_mode for x in s.links] == [None, None]
    assert [x.tx_packets for x in s.links] == [10, 20]


def test_it_rejects_hccs_arrays_of_different_lengths() -> None:
    lines = read("npu-smi-info-t-hccs-i0-c0-910b-ok-SYNTHESISED.txt").split("\n")
    lines[8] = "\thccs retry count               : [1 2 3]"
    with pytest.raises(ParseError) as exc:
        n.parse_hccs("\n".join(lines))
    assert exc.value.line == 9


def test_it_reports_hccs_unsupported_hardware() -> None:
    with pytest.raises(Unsupported):
        n.parse_hccs("This device does not support querying hccs.\n")


# -- property tests ------------------------------------------------------------------

SAMPLE_TEXT = st.sampled_from(sorted(INFO_TABLES)).map(read)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_it_never_crashes_on_arbitrary_text(text: str) -> None:
    for parse in (
        n.parse_info,
        n.parse_kv,
        n.parse_usages,
        n.parse_health,
        n.parse_hccs,
        n.parse_mapping,
    ):
        try:
            parse(text)
        except (ParseError, Unsupported):
            pass


@settings(max_examples=200, deadline=None)
@given(SAMPLE_TEXT, st.data())
def test_it_never_crashes_on_a_mutated_real_table(
    text: str, data: st.DataObject
) -> None:
    lines = text.split("\n")
    index = data.draw(st.integers(0, len(lines) - 1))
    lines[index] = data.draw(
        st.one_of(st.text(max_size=120), st.just(lines[index][::-1]), st.just("|" * 4))
    )
    try:
        result = n.parse_info("\n".join(lines))
    except (ParseError, Unsupported):
        return
    assert isinstance(result, n.NpuSmiInfo) and result.chips


def test_it_rejects_a_table_line_of_the_wrong_width() -> None:
    lines = read("npu-smi-info-910b2-8card-idle-25.2.0.txt").split("\n")
    lines[9] = lines[9].replace("91.5        ", "91.5       ")  # 97 columns, not 98
    with pytest.raises(ParseError, match="97 characters wide, the table is 98") as exc:
        n.parse_info("\n".join(lines))
    assert exc.value.line == 10
