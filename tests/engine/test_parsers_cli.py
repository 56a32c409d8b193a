"""``python -m engine.parsers KIND FILE`` run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "ascend"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.parsers", *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_prints_npu_smi_info_as_json() -> None:
    result = run(
        "npu-smi-info",
        str(DATA / "npu-smi-info-a3-ascend910-8npu-16chip-procs-25.2.0.txt"),
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"chips", "processes"}
    assert len(data["chips"]) == 16 and len(data["processes"]) == 23
    chip1 = data["chips"][1]
    keys = ("npu", "chip", "name", "health", "power_w", "temp_c", "aicore_pct")
    assert [chip1[k] for k in keys] == [0, 1, "Ascend910", "OK", None, 44.0, 7.0]
    hbm = ("hbm_used_mb", "hbm_total_mb", "bus_id")
    assert [chip1[k] for k in hbm] == [61625, 65536, "0000:9F:00.0"]


def test_it_prints_null_for_columns_a_variant_lacks() -> None:
    result = run(
        "npu-smi-info",
        str(DATA / "npu-smi-info-300i-duo-310p3-4card-8chip-critical-25.0.rc1.txt"),
    )
    chips = json.loads(result.stdout)["chips"]
    assert {(c["hbm_used_mb"], c["hbm_total_mb"], c["power_w"]) for c in chips} == {
        (None, None, None)
    }
    assert [c["health"] for c in chips].count("Critical") == 1


def test_it_reads_stdin() -> None:
    result = run(
        "hccn-ping", "-", stdin=(DATA / "hccn_tool-ping-g-910b.txt").read_text()
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["loss_pct"] == 0.0


def test_it_prints_hccs_links() -> None:
    result = run(
        "npu-smi-hccs", str(DATA / "npu-smi-info-t-hccs-i0-c0-910b-nok-SYNTHESISED.txt")
    )
    data = json.loads(result.stdout)
    assert (
        data["health"] == "NOK"
        and len(data["links"]) == 7
        and data["links"][3]["error_count"] == 20000
    )


def test_it_exits_2_with_the_line_on_parse_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("link status: SIDEWAYS\n")
    result = run("hccn-link", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert "line 1" in result.stderr and "SIDEWAYS" in result.stderr


def test_it_exits_3_when_the_driver_lacks_the_command() -> None:
    result = run(
        "npu-smi-hccs",
        str(DATA / "npu-smi-info-t-hccs-unsupported-old-driver-SYNTHESISED.txt"),
    )
    assert result.returncode == 3 and "unsupported" in result.stderr


def test_it_lists_the_kinds_in_help() -> None:
    result = run("--help")
    assert result.returncode == 0
    for kind in (
        "npu-smi-info",
        "npu-smi-kv",
        "npu-smi-usages",
        "npu-smi-hccs",
        "hccn-link",
        "hccn-lldp",
        "hccn-ping",
    ):
        assert kind in result.stdout


def test_it_rejects_an_unknown_kind() -> None:
    result = run("nvidia-smi", "-")
    assert result.returncode == 2 and "invalid choice" in result.stderr
