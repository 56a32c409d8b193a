"""Sim node state contract (engine/sim/state/) and hardware model (engine/sim/hardware.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sim import hardware, state


@pytest.fixture
def node(tmp_path: Path) -> Path:
    return state.node_dir("ascend-01", tmp_path)


def _run_engine(d: Path, *, link_mode: str, load: float = 1.0, steps: int = 4) -> None:
    r = state.EngineReporter(
        d, pid=os.getpid(), rank=0, role="head", link_mode=link_mode
    )
    for i in range(steps):
        r.report(phase="ready", load=load, hbm_used_mb=50000, now=1000.0 + i)


def test_it_creates_node_dir_from_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIM_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SIM_NODE", raising=False)
    monkeypatch.setenv("NODE_NAME", "ascend-07")
    d = state.node_dir()
    assert d == tmp_path / "ascend-07" and d.is_dir()


def test_it_names_the_missing_env_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIM_STATE_DIR", raising=False)
    with pytest.raises(ValueError, match="SIM_STATE_DIR"):
        state.node_dir("x")


def test_it_round_trips_config(node: Path) -> None:
    cfg = state.NodeConfig(
        name="ascend-01",
        npu_ips=["127.10.1.1"],
        honours_roce_switch=False,
        server_model="atlas-200t-a2-box16",
    )
    state.save_config(node, cfg)
    loaded = state.load_config(node)
    assert loaded.npu_ips == ["127.10.1.1"] and loaded.honours_roce_switch is False
    assert loaded.server_model == "atlas-200t-a2-box16"
    assert (
        state.load_config(state.node_dir("fresh", node.parent)).honours_roce_switch
        is None
    )
    assert loaded.versions["vllm"] == "0.23.0"


def test_it_reads_defaults_from_broken_files(node: Path) -> None:
    (node / "node.json").write_text(
        '{"npu_count": "eight", "npu_ips": [1'
    )  # half-written
    (node / "faults.json").write_text('{"hccs_loss_pct": "lots", "roce_down": true}')
    (node / "engine.json").write_text("not json")
    assert state.load_config(node).npu_count == 8
    faults = state.load_faults(node)
    assert faults.hccs_loss_pct == 0.0 and faults.roce_down is True
    assert state.read_engine(node) == {"phase": "stopped"}


def test_it_injects_and_clears_faults(node: Path) -> None:
    state.inject_fault(node, "hccs-loss", "20")
    state.inject_fault(node, "crash", "once")
    f = state.inject_fault(node, "roce-down", None)
    assert (f.hccs_loss_pct, f.crash, f.roce_down) == (20.0, "once", True)
    assert state.load_faults(node).active() == ["hccs-loss", "roce-down", "crash"]
    state.clear_faults(node)
    assert state.load_faults(node) == state.Faults()
    assert [e["event"] for e in state.load_link_events(node)] == [
        "LINK DOWN",
        "LINK UP",
    ]


def test_it_rejects_unknown_fault_listing_allowed_forms(node: Path) -> None:
    with pytest.raises(ValueError) as exc:
        state.inject_fault(node, "disk-full", None)
    assert (
        "disk-full" in str(exc.value)
        and "hccs-loss PCT" in str(exc.value)
        and "crash once|always" in str(exc.value)
    )


@pytest.mark.parametrize(
    ("fault", "value", "needle"),
    [
        ("hccs-loss", "abc", "hccs-loss PCT"),
        ("hccs-loss", "150", "out of range"),
        ("overtemp", None, "overtemp CELSIUS"),
        ("crash", "twice", "crash once|always"),
        ("roce-down", "yes", "takes no value"),
        ("slow-start", "-1", "slow-start SECONDS"),
    ],
)
def test_it_rejects_bad_fault_values_naming_the_fault(
    node: Path, fault: str, value: str | None, needle: str
) -> None:
    with pytest.raises(ValueError, match=fault) as exc:
        state.inject_fault(node, fault, value)
    assert needle in str(exc.value)
    assert state.load_faults(node) == state.Faults()  # nothing half-applied


def test_it_reports_engine_and_releases_on_close(node: Path) -> None:
    r = state.EngineReporter(
        node, pid=os.getpid(), rank=2, role="headless", link_mode="hccs"
    )
    r.report(phase="ready", load=0.5, hbm_used_mb=40000)
    eng = state.read_engine(node)
    assert (eng["phase"], eng["rank"], eng["hbm_used_mb"], eng["link_mode"]) == (
        "ready",
        2,
        40000,
        "hccs",
    )
    r.close()
    assert state.read_engine(node) == {"phase": "stopped"}


def test_it_reads_a_dead_engine_pid_as_stopped(node: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    state.EngineReporter(
        node, pid=proc.pid, rank=0, role="head", link_mode="hccs"
    ).report(phase="ready", load=1.0, hbm_used_mb=1)
    assert state.read_engine(node)["phase"] == "stopped"


def test_it_rejects_unknown_phase_and_link_mode(node: Path) -> None:
    with pytest.raises(ValueError, match="link_mode"):
        state.EngineReporter(node, pid=1, rank=0, role="head", link_mode="pcie")
    r = state.EngineReporter(node, pid=1, rank=0, role="head", link_mode="hccs")
    with pytest.raises(ValueError, match="phase"):
        r.report(phase="running", load=0.1, hbm_used_mb=0)


def test_it_grows_hccs_counters_with_load(node: Path) -> None:
    _run_engine(node, link_mode="hccs", load=1.0, steps=3)  # two 1-second steps
    tx = hardware.hccs_links(state.load_counters(node), 0).tx
    assert len(tx) == 7 and all(1_900_000 <= x <= 2_200_000 for x in tx)


def test_it_keeps_counters_monotonic_across_engine_restarts(node: Path) -> None:
    _run_engine(node, link_mode="hccs")
    first = hardware.hccs_links(state.load_counters(node), 3).tx[0]
    _run_engine(node, link_mode="hccs")
    assert hardware.hccs_links(state.load_counters(node), 3).tx[0] > first > 0


def test_it_freezes_hccs_in_roce_mode_on_a_box16(node: Path) -> None:
    # the Atlas 200T A2 Box16 honours HCCL_INTRA_ROCE_ENABLE (engine/capabilities/servers.py)
    state.save_config(
        node, state.NodeConfig(name=node.name, server_model="atlas-200t-a2-box16")
    )
    _run_engine(node, link_mode="roce")
    counters = state.load_counters(node)
    assert hardware.hccs_links(counters, 0).tx == [0] * 7
    assert hardware.roce_stats(counters, 0)["roce_tx_all_pkt_num"] > 0


def test_an_800t_a2_node_ignores_the_roce_switch_by_default(node: Path) -> None:
    assert state.load_config(node).server_model == "atlas-800t-a2"
    _run_engine(node, link_mode="roce")
    assert min(hardware.hccs_links(state.load_counters(node), 0).tx) > 0


def test_it_keeps_hccs_growing_when_roce_switch_not_honoured(node: Path) -> None:
    state.save_config(node, state.NodeConfig(name=node.name, honours_roce_switch=False))
    _run_engine(node, link_mode="roce")
    assert min(hardware.hccs_links(state.load_counters(node), 0).tx) > 0


def test_it_sends_more_roce_traffic_when_intra_traffic_moves_to_roce(
    tmp_path: Path,
) -> None:
    a, b = state.node_dir("a", tmp_path), state.node_dir("b", tmp_path)
    state.save_config(b, state.NodeConfig(name="b", server_model="atlas-200t-a2-box16"))
    _run_engine(a, link_mode="hccs")
    _run_engine(b, link_mode="roce")
    roce_a = hardware.roce_stats(state.load_counters(a), 0)["roce_tx_all_pkt_num"]
    roce_b = hardware.roce_stats(state.load_counters(b), 0)["roce_tx_all_pkt_num"]
    assert 0 < roce_a < roce_b


def test_it_makes_hccs_loss_match_the_injected_pct(node: Path) -> None:
    state.inject_fault(node, "hccs-loss", "17.5")
    _run_engine(node, link_mode="hccs", load=0.8)
    links = hardware.hccs_links(state.load_counters(node), 5)
    for i in range(7):
        assert (links.retry[i] + links.crc[i]) / links.tx[i] == pytest.approx(
            0.175, abs=1e-4
        )
        assert links.crc[i] > 0 and links.retry[i] > links.crc[i]


def test_it_stops_roce_counters_on_roce_down(node: Path) -> None:
    state.inject_fault(node, "roce-down", None)
    _run_engine(node, link_mode="hccs")
    assert hardware.roce_stats(state.load_counters(node), 0)["roce_rx_all_pkt_num"] == 0


def test_it_stands_still_when_not_ready(node: Path) -> None:
    r = state.EngineReporter(
        node, pid=os.getpid(), rank=0, role="head", link_mode="hccs"
    )
    for i in range(3):
        r.report(phase="loading", load=1.0, hbm_used_mb=1000, now=10.0 + i)
    assert hardware.hccs_links(state.load_counters(node), 0).tx == [0] * 7


def test_it_derives_chip_readings_from_load_and_faults() -> None:
    cfg = state.NodeConfig(name="n")
    idle = hardware.chip_readings(cfg, state.Faults(), {"phase": "stopped"}, now=0.0)
    busy_engine = {"phase": "ready", "pid": 42, "load": 1.0, "hbm_used_mb": 60000}
    busy = hardware.chip_readings(cfg, state.Faults(), busy_engine, now=0.0)
    assert all(
        c.process_pid is None and 38 <= c.temp_c <= 45 and c.power_w < 110 for c in idle
    )
    assert all(
        c.process_pid == 42 and c.temp_c >= 68 and c.power_w > 290 and c.aicore_pct > 85
        for c in busy
    )
    assert busy[0].hbm_used_mb == 60000
    faults = state.Faults(overtemp_c=91.0, npu_warning=True, hbm_pressure_pct=95.0)
    hot = hardware.chip_readings(cfg, faults, {"phase": "stopped"}, now=0.0)
    assert hot[3].temp_c == 91 and hot[0].health == "Warning" and hot[1].health == "OK"
    assert hot[0].error_codes and hot[2].hbm_used_mb == int(65536 * 0.95)


def test_the_sim_engine_feels_the_link_the_hardware_really_uses(node: Path) -> None:
    from engine.sim.vllm.process import Env

    state.inject_fault(node, "hccs-loss", "20")
    faults = state.load_faults(node)
    on_roce = Env(link_mode="roce", node_dir=node, node=node.name)
    # the demo's 800T A2 ignores HCCL_INTRA_ROCE_ENABLE: still HCCS, still lossy
    assert on_roce.link(faults) == ("hccs", 20.0)
    state.save_config(
        node, state.NodeConfig(name=node.name, server_model="atlas-200t-a2-box16")
    )
    assert on_roce.link(faults) == ("roce", 0.0)
    assert Env(link_mode="hccs", node_dir=node, node=node.name).link(faults) == (
        "hccs",
        20.0,
    )
