"""engine.evidence (a node's bounded bundle), engine.sim.plog and engine.findings (across nodes)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from engine.evidence import (
    MAX_FILE_BYTES,
    check_request,
    gather,
    kernel_lines,
    newest_plogs,
    plog_dirs,
)
from engine.findings import cross_node_findings, line_time
from engine.sim.plog import crash_traces, write_device_fault
from engine.sim.state import node_dir

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def sim_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENGINE_DRIVER", "sim")
    monkeypatch.setenv("SIM_STATE_DIR", str(tmp_path / "sim"))
    monkeypatch.setenv("SIM_NODE", "ascend-03")
    return node_dir("ascend-03")


def _no_dmesg(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(
        argv, 1, "", "dmesg: read kernel buffer failed: Operation not permitted"
    )


def _names(bundle: dict) -> list[str]:
    return [f["name"] for f in bundle["files"]]


def test_it_gathers_log_plog_npu_smi_links_and_versions_from_a_sim_node(
    sim_node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-must-not-leak")
    plog, _ = write_device_fault(sim_node, pid=4242, device=2)
    bundle = gather(
        node="ascend-03",
        engine_log=[
            "(APIServer pid=1) INFO 12-04 16:30:00 [api_server.py:1896] vLLM API server version 0.23.0"
        ],
        home=sim_node,
        environ=os.environ,
        versions={"vllm": "0.23.0"},
        run=_no_dmesg,
    )
    names = _names(bundle)
    assert names[:5] == [
        "engine.log",
        "npu-smi-info.txt",
        "links.txt",
        "dmesg-npu.txt",
        "versions.json",
    ]
    assert f"plog/{plog.name}" in names
    files = {f["name"]: f["text"] for f in bundle["files"]}
    assert (
        "npu-smi" in files["npu-smi-info.txt"] and "910B" in files["npu-smi-info.txt"]
    )
    assert (
        "hccn_tool -i 7 -link -g" in files["links.txt"]
        and "link status: UP" in files["links.txt"]
    )
    assert "not readable" in files["dmesg-npu.txt"]
    assert "sk-must-not-leak" not in json.dumps(bundle)


def test_it_keeps_only_the_newest_cann_named_regular_plog_files(tmp_path: Path) -> None:
    d = tmp_path / "ascend" / "log" / "debug" / "plog"
    d.mkdir(parents=True)
    for k in range(8):
        p = d / f"plog-{100 + k}_2026120416300{k}123.log"
        p.write_text(f"file {k}\n")
        os.utime(p, (1_000_000 + k, 1_000_000 + k))
    (d / "notes.txt").write_text("not a plog")
    secret = tmp_path / "secret.log"
    secret.write_text("password=hunter2")
    (d / "plog-999_20261204163009999.log").symlink_to(secret)
    got = newest_plogs(plog_dirs(tmp_path, {}), limit=3)
    assert [p.name for p in got] == [
        "plog-107_20261204163007123.log",
        "plog-106_20261204163006123.log",
        "plog-105_20261204163005123.log",
    ]


def test_it_looks_under_ascend_process_log_path_too(tmp_path: Path) -> None:
    custom = tmp_path / "custom"
    (custom / "debug" / "plog").mkdir(parents=True)
    (custom / "debug" / "plog" / "plog-7_20261204163000000.log").write_text("x\n")
    got = newest_plogs(
        plog_dirs(tmp_path / "home", {"ASCEND_PROCESS_LOG_PATH": str(custom)})
    )
    assert [p.name for p in got] == ["plog-7_20261204163000000.log"]
    assert plog_dirs(tmp_path, {"ASCEND_PROCESS_LOG_PATH": "relative/dir"}) == [
        tmp_path / "ascend" / "log" / "debug" / "plog"
    ]


def test_it_caps_each_file_and_the_node_total(sim_node: Path) -> None:
    big = sim_node / "ascend" / "log" / "debug" / "plog"
    big.mkdir(parents=True, exist_ok=True)
    for k in range(3):
        (big / f"plog-{k + 1}_2026120416300{k}000.log").write_text(
            "".join(f"[INFO] line {i}\n" for i in range(60_000))
        )
    bundle = gather(
        node="ascend-03", engine_log=[], home=sim_node, environ={},
        versions={}, run=_no_dmesg, max_bytes=600 * 1024,
    )  # fmt: skip
    plogs = [f for f in bundle["files"] if f["name"].startswith("plog/")]
    assert all(
        f["truncated"] and len(f["text"].encode()) <= MAX_FILE_BYTES for f in plogs
    )
    assert plogs[0]["text"].startswith("[INFO] line ")  # no partial first line
    assert bundle["bytes"] <= 600 * 1024 and len(bundle["skipped"]) == 1


def test_it_keeps_only_npu_and_hccs_kernel_lines() -> None:
    out = "\n".join([
        "2026-12-04T16:30:00,000001+00:00 usb 1-1: new device",
        "2026-12-04T16:30:01,000002+00:00 [davinci3] devdrv_heart_beat lost",
        "2026-12-04T16:30:02,000003+00:00 hccs link 2 down",
    ])  # fmt: skip

    def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        assert argv == ["dmesg", "--time-format", "iso"]
        return subprocess.CompletedProcess(argv, 0, out, "")

    f = kernel_lines(run)
    assert "usb" not in f.text and "davinci3" in f.text and "hccs link 2" in f.text


def test_it_checks_the_request_strictly() -> None:
    assert check_request(log_lines=200) == 200
    for bad in (True, "200", 0, 5001, 2.5, None):
        with pytest.raises(ValueError, match="log_lines"):
            check_request(log_lines=bad)


def test_the_sim_crash_leaves_a_cann_plog_and_ee9999_that_diagnose_finds(
    sim_node: Path,
) -> None:
    from engine.diagnose import diagnose

    log = sim_node / "engine.log"
    path = crash_traces(sim_node, log, pid=5150)
    assert path.parent == sim_node / "ascend" / "log" / "debug" / "plog"
    assert newest_plogs(plog_dirs(sim_node, {})) == [path]
    first = path.read_text().splitlines()[0]
    assert first.startswith("[ERROR] RUNTIME(5150,python3):")
    assert abs(line_time(first, 2026) - time.time()) < 2 * 86400
    assert [d.id for d in diagnose(path.read_text().splitlines())] == ["RT507015"]
    assert [d.id for d in diagnose(log.read_text().splitlines())] == ["RT507015"]


def test_it_reads_cann_vllm_and_iso_stamps() -> None:
    cann = line_time("[ERROR] HCCL(1,p):2026-03-18-10:33:52.113.403 [x.cc:1] y", 1999)
    iso = line_time("2026-03-18T10:33:52,113403+00:00 davinci", 1999)
    vllm = line_time(
        "(APIServer pid=1) ERROR 03-18 10:33:52 [core_client.py:564] z", 2026
    )
    assert cann == pytest.approx(iso) and int(cann) == vllm
    assert line_time("no stamp here", 2026) is None


def _bundle(node: str, name: str, text: str) -> dict:
    return {"node": node, "files": [{"name": name, "text": text}]}


def test_the_first_fault_is_the_earliest_error_across_nodes_not_the_loudest() -> None:
    crash = (
        "[ERROR] RUNTIME(5150,python3):2026-12-04-16:30:01.250.000 [api_c.cc:1580]5224 "
        "rtDeviceSynchronizeWithTimeout:ErrCode=507015, desc=[aicore exception], InnerCode=0x715002a\n"
    )
    # the head notices in the same second (vLLM prints whole seconds), then dies
    head = (
        "(APIServer pid=9) ERROR 12-04 16:30:01 [core_client.py:564] Engine core proc "
        "EngineCore_DP2 on ascend-03 died unexpectedly, shutting down client.\n"
        "(APIServer pid=9) ERROR 12-04 16:30:01 [async_llm.py:480] "
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n"
    )
    # a louder (critical) error on another node, but later
    loud = (
        "[ERROR] RUNTIME(77,python3):2026-12-04-16:31:40.000.000 [x.cc:1]78 "
        "HBM_MULTI_BIT_ECC detected\n"
    )
    found = cross_node_findings(
        [
            _bundle("ascend-01", "engine.log", head),
            _bundle("ascend-02", "plog/plog-77_20261204163140000.log", loud),
            _bundle("ascend-03", "plog/plog-5150_20261204163001250.log", crash),
        ],
        2026,
    )
    assert [(f.node, f.id) for f in found] == [
        ("ascend-03", "RT507015"),
        ("ascend-01", "ENGINE_DEAD"),
        ("ascend-02", "RT507054"),
    ]
    assert [f.first for f in found] == [True, False, False]


def test_it_takes_the_stamp_above_an_unstamped_evidence_line() -> None:
    text = (DATA / "logs" / "torch_npu-EE9999-aicore-507015.log").read_text()
    [f] = cross_node_findings([_bundle("ascend-02", "engine.log", text)], 2025)
    assert f.id == "RT507015" and f.first and f.time is not None


def test_a_bare_crash_fault_means_once(sim_node: Path) -> None:
    from engine.sim.state import inject_fault

    assert inject_fault(sim_node, "crash", None).crash == "once"
    with pytest.raises(ValueError, match="crash once|always"):
        inject_fault(sim_node, "crash", "twice")


def test_a_finding_shows_its_stamp_as_logged() -> None:
    crash = "[ERROR] RUNTIME(1,p):2026-12-04-16:30:01.250.000 [a.cc:1]2 desc=[aicore exception]\n"
    [f] = cross_node_findings(
        [_bundle("n", "plog/plog-1_20261204163001250.log", crash)], 2026
    )
    assert f.time_text == "2026-12-04 16:30:01.250"
