"""Server model detection: SMBIOS product name + npu-smi chip, at preflight, on the sim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.parsers.npu_smi_kv import parse_board
from engine.parsers.server_model import (
    chip_family,
    detect_server_model,
    model_from_product_name,
    parse_dmi_product_name,
)
from engine.preflight import PASS, WARN, check_server_model
from engine.sim import state

DATA = Path(__file__).resolve().parents[1] / "data" / "ascend"
ROOT = Path(__file__).resolve().parents[2]


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_it_reads_the_product_name_and_drops_placeholders() -> None:
    assert (
        parse_dmi_product_name(
            read("dmidecode-s-system-product-name-atlas-800t-a2-SYNTHESISED.txt")
        )
        == "Atlas 800T A2"
    )
    assert (
        parse_dmi_product_name("# SMBIOS entry point at 0x7f\nAtlas 800I A2\n")
        == "Atlas 800I A2"
    )
    for placeholder in ("To be filled by O.E.M.\n", "Not Specified\n", "\n", ""):
        assert parse_dmi_product_name(placeholder) is None


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Atlas 800T A2", "atlas-800t-a2"),
        ("Atlas 800I A2", "atlas-800i-a2"),
        ("Atlas 200T A2 Box16", "atlas-200t-a2-box16"),
        ("Atlas 800T A3", "atlas-800t-a3"),
        ("Atlas 300T Pro", "atlas-300t-pro"),
        ("PowerEdge R620", None),
    ],
)
def test_product_names_map_to_capability_keys(name: str, key: str | None) -> None:
    assert model_from_product_name(name) == key


def test_the_chip_family_comes_from_real_npu_smi_board_output() -> None:
    board = parse_board(read("npu-smi-info-t-board-i0-910b-25.5.1.txt"))
    # npu-smi's "Product Name" is the card's part code, not the server
    assert board.product_name == "IT21HMDC_Bin5"
    assert model_from_product_name(board.product_name) is None
    assert chip_family(None, board.device_id) == "910B"
    assert chip_family("910B3") == "910B" and chip_family("Ascend910") == "910_93"


def test_a_product_name_that_contradicts_the_chip_is_not_trusted() -> None:
    found = detect_server_model("Atlas 800T A3", "910B3")
    assert found.model == "unknown" and "not trusted" in found.evidence
    assert detect_server_model("Atlas 800T A2", "910B3").model == "atlas-800t-a2"
    unknown = detect_server_model(None, "910B3")
    assert unknown.model == "unknown" and unknown.chip_family == "910B"


@pytest.fixture()
def sim_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENGINE_DRIVER", "sim")
    monkeypatch.setenv("SIM_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("SIM_NODE", "ascend-05")
    monkeypatch.delenv("SIM_TOOLS_EXEC", raising=False)
    return state.node_dir()


def test_preflight_reports_the_demo_800t_a2(sim_node: Path) -> None:
    check, found = check_server_model()
    assert check.status == PASS and found.model == "atlas-800t-a2"
    assert "Atlas 800T A2" in check.evidence and "910B3" in check.evidence


def test_preflight_warns_on_an_unknown_server(sim_node: Path) -> None:
    state.save_config(
        sim_node, state.NodeConfig(name="ascend-05", server_model="unknown")
    )
    check, found = check_server_model()
    assert check.status == WARN and found.model == "unknown"
    assert "override" in check.fix


def test_the_sim_dmidecode_executable_prints_the_box16_model(
    sim_node: Path, tmp_path: Path
) -> None:
    state.save_config(
        sim_node, state.NodeConfig(name="ascend-05", server_model="atlas-200t-a2-box16")
    )
    env = {
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NODE": "ascend-05",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "engine/sim/bin/dmidecode"),
            "-s",
            "system-product-name",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0 and out.stdout == "Atlas 200T A2 Box16\n"
    bad = subprocess.run(
        [sys.executable, str(ROOT / "engine/sim/bin/dmidecode"), "-s", "cpu-flags"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert bad.returncode == 2 and "Invalid string keyword: cpu-flags" in bad.stderr
