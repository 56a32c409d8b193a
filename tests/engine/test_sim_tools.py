"""Fake npu-smi / hccn_tool: real formats, parsed by the real parsers, run as executables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.parsers import hccs as hccs_parser
from engine.parsers import npu_smi as npu_smi_parser
from engine.parsers import npu_smi_kv
from engine.sim import BIN_DIR, hccn_tool, npu_smi, state

REPO = Path(__file__).resolve().parents[2]
BIN = BIN_DIR
REFERENCE = Path("/work/shared/reference/ascend")

# hccn_tool -stat -g key order (tool.c tool_display_*_info; ascend-facts §3, non-ext build)
STAT_KEYS = (
    ["mac_tx_mac_pause_num", "mac_rx_mac_pause_num", "mac_tx_pfc_pkt_num"]
    + [f"mac_tx_pfc_pri{i}_pkt_num" for i in range(8)]
    + ["mac_rx_pfc_pkt_num"]
    + [f"mac_rx_pfc_pri{i}_pkt_num" for i in range(8)]
    + [
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
    ]
)


def _ips(k: int) -> list[str]:
    return [f"127.10.{k}.{i + 1}" for i in range(8)]


@pytest.fixture
def cluster(tmp_path: Path) -> tuple[Path, Path]:
    a, b = state.node_dir("ascend-01", tmp_path), state.node_dir("ascend-02", tmp_path)
    state.save_config(a, state.NodeConfig(name="ascend-01", npu_ips=_ips(1)))
    state.save_config(b, state.NodeConfig(name="ascend-02", npu_ips=_ips(2)))
    return a, b


def _serve(
    d: Path, *, link_mode: str = "hccs", load: float = 1.0, t0: float = 1000.0
) -> None:
    r = state.EngineReporter(
        d, pid=os.getpid(), rank=0, role="head", link_mode=link_mode
    )
    for i in range(3):
        r.report(phase="ready", load=load, hbm_used_mb=58626, now=t0 + i)


def smi(d: Path, *argv: str) -> str:
    code, out = npu_smi.run(list(argv), d)
    assert code == 0, out
    return out


def hccn(d: Path, *argv: str) -> tuple[int, str, str]:
    return hccn_tool.run(list(argv), d)


def test_it_prints_the_98_column_table_like_the_real_sample(
    cluster: tuple[Path, Path],
) -> None:
    a, _ = cluster
    lines = smi(a, "info").splitlines()
    assert {len(line) for line in lines} == {98}
    sample = (
        (REFERENCE / "npu-smi-info-910b2-8card-idle-25.2.0.txt")
        .read_text()
        .splitlines()
    )
    assert lines[2:6] == sample[2:6]  # rules and both header lines, byte for byte
    assert lines[-3:] == sample[-3:]  # idle process rows
    assert lines[-2].startswith("| No running processes found in NPU 7")


def test_it_parses_into_8_chips_with_engine_hbm_and_processes(
    cluster: tuple[Path, Path],
) -> None:
    a, _ = cluster
    _serve(a, load=1.0)
    text = smi(a, "info")
    assert {len(line) for line in text.splitlines()} == {98}
    assert (
        "58626/ 65536" in text
    )  # 5-digit used value runs into the slash, as on real 910B
    info = npu_smi_parser.parse_info(text)
    assert len(info.chips) == 8 and info.version == "25.2.0"
    assert all(c.hbm_used_mb == 58626 and c.hbm_total_mb == 65536 for c in info.chips)
    assert all(c.temp_c is not None and c.temp_c >= 68 for c in info.chips)
    assert [p.pid for p in info.processes] == [os.getpid()] * 8 and info.processes[
        0
    ].name == ""


def test_it_shows_faults_in_health_and_temperature(cluster: tuple[Path, Path]) -> None:
    a, _ = cluster
    state.inject_fault(a, "npu-warning", None)
    state.inject_fault(a, "overtemp", "92")
    chips = npu_smi_parser.parse_info(smi(a, "info")).chips
    assert chips[0].health == "Warning" and chips[1].health == "OK"
    assert all(c.temp_c == 92 for c in chips)
    health = npu_smi_kv.parse_health(
        smi(a, "info", "-t", "health", "-i", "0", "-c", "0")
    )
    assert health.health == "Warning" and health.error_codes == ["80E01801"]


def test_it_prints_key_value_types_the_parsers_accept(
    cluster: tuple[Path, Path],
) -> None:
    a, _ = cluster
    _serve(a, load=0.5)
    usage = npu_smi_kv.parse_usages(smi(a, "info", "-t", "usages", "-i", "2"))
    assert (
        usage[0].npu_id == 2
        and usage[0].hbm_capacity_mb == 65536
        and usage[0].hbm_usage_pct == 89
    )
    assert npu_smi_kv.parse_temp(smi(a, "info", "-t", "temp", "-i", "2"))
    assert npu_smi_kv.parse_power(smi(a, "info", "-t", "power", "-i", "2"))
    assert (
        npu_smi_kv.parse_memory(
            smi(a, "info", "-t", "memory", "-i", "2", "-c", "0")
        ).hbm_capacity_mb
        == 65536
    )
    assert npu_smi_kv.parse_board(smi(a, "info", "-t", "board", "-i", "2"))
    assert len(npu_smi_kv.parse_list(smi(a, "info", "-l"))) == 8
    assert len(npu_smi_kv.parse_mapping(smi(a, "info", "-m"))) == 8
    assert smi(a, "info", "-t", "power", "-i", "0").startswith(
        "\tNPU ID                         : 0\n"
    )


def test_it_prints_hccs_with_7_links_and_measurable_loss(
    cluster: tuple[Path, Path],
) -> None:
    a, _ = cluster
    state.inject_fault(a, "hccs-loss", "20")
    _serve(a, t0=0.0)
    before = hccs_parser.parse_hccs(smi(a, "info", "-t", "hccs", "-i", "4", "-c", "0"))
    _serve(a, t0=10.0)
    after = hccs_parser.parse_hccs(smi(a, "info", "-t", "hccs", "-i", "4", "-c", "0"))
    assert len(after.links) == 7 and after.health == "OK"
    assert all(
        link.speed == 224 and link.tx_bytes == link.tx_packets * 20
        for link in after.links
    )
    assert hccs_parser.hccs_loss(before, after) == pytest.approx(0.20, abs=1e-3)


def test_it_keeps_hccs_flat_after_failover_to_roce(cluster: tuple[Path, Path]) -> None:
    a, _ = cluster
    # a Box16 honours the switch; the demo's 800T A2 does not (engine/capabilities/servers.py)
    cfg = state.load_config(a)
    cfg.server_model = "atlas-200t-a2-box16"
    state.save_config(a, cfg)
    _serve(a, t0=0.0)
    before = hccs_parser.parse_hccs(smi(a, "info", "-t", "hccs", "-i", "0", "-c", "0"))
    stat_before = hccn(a, "-i", "0", "-stat", "-g")[1]
    _serve(a, link_mode="roce", t0=10.0)
    after = hccs_parser.parse_hccs(smi(a, "info", "-t", "hccs", "-i", "0", "-c", "0"))
    assert [x.tx_packets for x in after.links] == [x.tx_packets for x in before.links]
    assert hccn(a, "-i", "0", "-stat", "-g")[1] != stat_before


def test_it_answers_unknown_commands_like_the_real_tools(
    cluster: tuple[Path, Path],
) -> None:
    a, _ = cluster
    code, out = npu_smi.run(["dmon"], a)  # npu-smi dmon does not exist
    assert code != 0 and out.startswith("Command or option is not found.")
    code, out = npu_smi.run(["info", "-t", "nonsense", "-i", "0"], a)
    assert code != 0 and out == "Error parameter of -t\n"
    code, out = npu_smi.run(["info", "-t", "hccs-credit", "-i", "0", "-c", "0"], a)
    assert code != 0 and "does not support querying hccs-credit" in out
    code, out = npu_smi.run(["info", "-t", "temp", "-i", "9"], a)
    assert code != 0 and "-i" in out
    code, _, err = hccn(a, "-i", "0", "-bogus", "-g")
    assert code != 0 and err.startswith("Get invalid major cmd.")
    code, _, err = hccn(a, "-i", "0", "-link", "-x")
    assert code != 0 and err.startswith("Get unknown option!")
    code, _, err = hccn(a, "-i", "8", "-link", "-g")
    assert code != 0 and err == "Get invalid device id.\n"


def test_it_prints_hccn_tool_gets(cluster: tuple[Path, Path]) -> None:
    a, _ = cluster
    _serve(a)
    assert hccn(a, "-i", "0", "-link", "-g") == (0, "link status: UP\n", "")
    assert hccn(a, "-i", "0", "-net_health", "-g")[1] == "net health status: Success\n"
    assert (
        hccn(a, "-i", "3", "-ip", "-g")[1]
        == "ipaddr:127.10.1.4\nnetmask:255.255.255.0\n"
    )
    assert (
        hccn(a, "-i", "3", "-gateway", "-g")[1]
        == "default gateway:127.10.1.254, Iface:eth3\n"
    )
    assert (
        hccn(a, "-i", "3", "-netdetect", "-g")[1] == "netdetect address: 127.10.1.254\n"
    )
    assert "\tIfname: 400GE1/1/4:2\n" in hccn(a, "-i", "3", "-lldp", "-g")[1]
    assert "Rx Power             : " in hccn(a, "-i", "3", "-optical", "-g")[1]
    assert hccn(a, "-i", "1", "-tls", "-g")[1].startswith(
        "dev_id:1, tls switch[0](0:disable, 1:enable)"
    )
    stat = hccn(a, "-i", "0", "-stat", "-g")[1].splitlines()
    assert stat[0] == "packet statistics:"
    assert [line.split(":")[0] for line in stat[1:]] == STAT_KEYS
    values = dict(line.split(":") for line in stat[1:])
    assert int(values["roce_tx_all_pkt_num"]) > 0


def test_it_pings_npu_ips_of_healthy_sim_nodes(cluster: tuple[Path, Path]) -> None:
    a, _ = cluster
    code, out, _ = hccn(a, "-i", "0", "-ping", "-g", "address", "127.10.2.5")
    assert code == 0 and out.splitlines()[0] == "device 0 PING 127.10.2.5"
    assert (
        out.splitlines()[-1] == "3 packets transmitted, 3 received, 0.00% packet loss"
    )
    out = hccn(a, "-i", "0", "-ping", "-g", "address", "127.10.9.9")[1]
    assert out.endswith("3 packets transmitted, 0 received, 100.00% packet loss\n")
    code, _, err = hccn(a, "-i", "0", "-ping", "-g")
    assert code != 0 and "address" in err


def test_it_takes_the_roce_links_down(cluster: tuple[Path, Path]) -> None:
    a, b = cluster
    state.inject_fault(b, "roce-down", None)
    for npu in range(8):
        assert hccn(b, "-i", str(npu), "-link", "-g")[1] == "link status: DOWN\n"
    assert hccn(b, "-i", "0", "-net_health", "-g")[1] == "net health status: Fault\n"
    link_stat = hccn(b, "-i", "2", "-link_stat", "-g")[1].splitlines()
    assert link_stat[2] == "[devid 2]link down count     : 1"
    assert link_stat[4].endswith("    LINK DOWN")  # newest record first
    out = hccn(a, "-i", "0", "-ping", "-g", "address", "127.10.2.1")[1]
    assert "0 received, 100.00% packet loss" in out
    code, _, err = hccn(b, "-i", "0", "-ping", "-g", "address", "127.10.1.1")
    assert code != 0 and "Link status is down" in err
    state.clear_faults(b)
    assert hccn(b, "-i", "0", "-link", "-g")[1] == "link status: UP\n"
    assert "link up count       : 2" in hccn(b, "-i", "2", "-link_stat", "-g")[1]


def test_it_runs_the_bin_scripts_from_path(cluster: tuple[Path, Path]) -> None:
    a, _ = cluster
    env = dict(os.environ)
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        SIM_STATE_DIR=str(a.parent),
        SIM_NODE="ascend-01",
        SIM_PYTHON=sys.executable,
    )
    env.pop("NODE_NAME", None)
    info = subprocess.run(
        ["npu-smi", "info"], env=env, capture_output=True, text=True, timeout=60
    )
    assert info.returncode == 0, info.stderr
    assert len(npu_smi_parser.parse_info(info.stdout).chips) == 8
    link = subprocess.run(
        ["hccn_tool", "-i", "0", "-link", "-g"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (link.returncode, link.stdout) == (0, "link status: UP\n")
    bad = subprocess.run(
        ["hccn_tool", "-i", "0", "-nope", "-g"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "Get invalid major cmd." in bad.stderr


def test_it_fails_like_a_missing_driver_without_sim_env(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SIM_STATE_DIR", "SIM_NODE", "NODE_NAME")
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["SIM_PYTHON"] = sys.executable
    res = subprocess.run(
        ["npu-smi", "info"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (
        res.returncode != 0
        and "dcmi module initialize failed" in res.stdout
        and "SIM_STATE_DIR" in res.stderr
    )


def test_hccs_unsupported_fault_answers_like_a_driver_without_the_type(
    tmp_path: Path,
) -> None:
    from engine.parsers import Unsupported
    from engine.parsers.hccs import parse_hccs
    from engine.parsers.npu_smi_links import parse_hccs_bw
    from engine.sim import npu_smi

    d = state.node_dir("ascend-03", tmp_path)
    code, out = npu_smi.run(["info", "-t", "hccs-bw", "-i", "0", "-c", "0"], d)
    assert code == 0 and len(parse_hccs_bw(out).links) == 7
    state.inject_fault(d, "hccs-unsupported", None)
    for typ, parser in (("hccs", parse_hccs), ("hccs-bw", parse_hccs_bw)):
        code, out = npu_smi.run(["info", "-t", typ, "-i", "0", "-c", "0"], d)
        assert code == npu_smi.EXIT_INVALID_PARAMETER
        assert out == "Error parameter of -t\n"
        with pytest.raises(Unsupported):
            parser(out)
    assert "hccs-unsupported" in state.load_faults(d).active()
    state.clear_faults(d)
    assert npu_smi.run(["info", "-t", "hccs", "-i", "0", "-c", "0"], d)[0] == 0
