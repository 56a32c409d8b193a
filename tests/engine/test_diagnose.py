"""engine.diagnose on real logs (tests/data/ascend) and realistic tails (data/logs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.diagnose import diagnose, load_table, main

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "ascend"
LOGS = DATA / "logs"
REPO = Path(__file__).resolve().parents[2]


def _ids(path: Path) -> list[str]:
    return [d.id for d in diagnose(path.read_text(encoding="utf-8").splitlines())]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # real captures (provenance in tests/data/ascend/SOURCES.md)
        (REAL / "hccl-EI0002-notify-wait-timeout-plog.txt", ["EI0002"]),
        (REAL / "hccl-EI0006-socket-establish-timeout-plog.txt", ["EI0006"]),
        (REAL / "hccl-EI0012-sdma-error-plog.txt", ["EI0012"]),
        (REAL / "hccl-EI0012-sdma-error-screen-log.txt", ["EI0012"]),
        (REAL / "hccl-EI0013-error-cqe-plog.txt", ["EI0013"]),
        (REAL / "hccl-EI0013-error-cqe-screen-log.txt", ["EI0013"]),
        (REAL / "torch_npu-EE9999-event-wait-timeout-507011.txt", ["RT507011"]),
        (REAL / "torch_npu-ERR02200-hccl-init-error-code-1.txt", ["ERR02200"]),
        (REAL / "vllm-ascend-3800-engine-ready-timeout.txt", ["ENGINE_READY_TIMEOUT"]),
        (
            REAL / "vllm-35616-engine-ready-timeout-new-wording.txt",
            ["ENGINE_READY_TIMEOUT"],
        ),
        (
            REAL / "vllm-10439-no-available-memory-cache-blocks.txt",
            ["KV_CACHE_NO_MEMORY"],
        ),
        (
            REAL / "vllm-10517-kv-cache-smaller-than-max-model-len.txt",
            ["KV_CACHE_TOO_SMALL"],
        ),
        (REAL / "vllm-ascend-2248-diststore-wait-timeout.txt", ["DIST_STORE_TIMEOUT"]),
        (REAL / "vllm-17056-diststore-clients-joined.txt", ["DIST_STORE_TIMEOUT"]),
        (REAL / "npu-smi-dcmi-8005-in-container.txt", ["DCMI_DEVICE_BUSY"]),
        (REAL / "npu-smi-dcmi-8020-device-used.txt", ["DCMI_DEVICE_BUSY"]),
        (REAL / "vllm-ascend-10309-aclgraph-capture-mode.txt", ["ACL_GRAPH_CAPTURE"]),
        (REAL / "lmdeploy-3354-hccl-fftsplus-task-timeout.txt", ["HCCL_FFTS_TIMEOUT"]),
        (
            REAL / "vllm-ascend-16652-hccl-fftsplus-task-timeout.txt",
            ["HCCL_FFTS_TIMEOUT"],
        ),
        (REAL / "vllm-ascend-8938-zmq-address-in-use.txt", ["ZMQ_ADDR_IN_USE"]),
        # realistic tails (tests/data/logs/README.md says where each wording comes from)
        (LOGS / "vllm-headless-no-frontend.log", ["HEADLESS_NO_FRONTEND"]),
        (LOGS / "torch_npu-EE9999-hbm-ecc-507054.log", ["RT507054"]),
        (LOGS / "torch_npu-EE9999-dev-setup-507033.log", ["RT507033"]),
        (LOGS / "torch_npu-EE9999-link-error-507056.log", ["RT507056"]),
        (LOGS / "torch_npu-EE9999-aicore-507015.log", ["RT507015"]),
        (LOGS / "vllm-npu-out-of-memory.log", ["NPU_OOM"]),
        (LOGS / "torch_npu-EL0004-207001.log", ["NPU_OOM"]),
        (LOGS / "hccp-EJ0003-port-bound.log", ["EJ0003"]),
        (LOGS / "vllm-api-address-in-use.log", ["EJ0003"]),
        (LOGS / "vllm-engine-dead.log", ["ENGINE_DEAD"]),
        (LOGS / "vllm-unrecognized-arguments.log", ["UNRECOGNIZED_ARGS"]),
        (LOGS / "vllm-model-path-missing.log", ["MODEL_PATH_MISSING"]),
        (LOGS / "multi-rank-cqe-cascade.log", ["EI0013"]),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else "-".join(v),
)
def test_it_recognises_each_signature(path: Path, expected: list[str]) -> None:
    assert _ids(path) == expected


def test_it_resolves_ee9999_to_the_runtime_result_that_follows() -> None:
    lines = (
        (REAL / "torch_npu-EE9999-event-wait-timeout-507011.txt")
        .read_text()
        .splitlines()
    )
    [d] = diagnose(lines)
    assert d.id == "RT507011"
    assert "507011" in d.cause and "HCCL_EXEC_TIMEOUT" in d.fix
    assert any("EE9999" in r for r in d.related)


def test_it_resolves_ee9999_even_when_the_code_was_printed_earlier() -> None:
    [d] = diagnose(
        (LOGS / "torch_npu-EE9999-dev-setup-507033.log").read_text().splitlines()
    )
    assert d.id == "RT507033" and d.line == 3
    assert any("EE9999" in r for r in d.related)


def test_it_keeps_ee9999_when_no_runtime_result_follows() -> None:
    lines = ["EE9999: Inner Error!", "EE9999: [PID: 1] something odd happened"]
    [d] = diagnose(lines)
    assert d.id == "EE9999" and d.line == 1


def test_it_tells_to_replace_the_npu_on_hbm_ecc() -> None:
    [d] = diagnose(
        (LOGS / "torch_npu-EE9999-hbm-ecc-507054.log").read_text().splitlines()
    )
    assert d.severity == "critical"
    assert "replace" in d.fix and "隔离" in d.fix_zh
    assert "runtime result = 507054" in d.evidence


def test_it_names_the_hccl_error_code_of_err02200() -> None:
    [d] = diagnose(
        (REAL / "torch_npu-ERR02200-hccl-init-error-code-1.txt")
        .read_text()
        .splitlines()
    )
    assert "hcclCommInitRootInfoConfig returned 1 = HCCL_E_PARA" in d.cause
    assert "HCCL_IF_IP" in d.fix


def test_it_points_ei0006_at_peers_tls_and_ping() -> None:
    lines = (
        (REAL / "hccl-EI0006-socket-establish-timeout-plog.txt")
        .read_text()
        .splitlines()
    )
    [d] = diagnose(lines)
    assert "wait socket establish timeout" in d.evidence
    assert "-tls -g" in d.fix and "-ping -g" in d.fix and "peer rank" in d.fix


def test_it_points_ei0013_at_link_flaps_and_rdma_retry() -> None:
    [d] = diagnose((REAL / "hccl-EI0013-error-cqe-plog.txt").read_text().splitlines())
    assert "-link_stat -g" in d.fix
    assert "HCCL_RDMA_TIMEOUT" in d.fix and "HCCL_RDMA_RETRY_CNT" in d.fix


def test_it_lists_the_root_cause_before_its_consequences() -> None:
    lines = (LOGS / "vllm-headless-no-frontend.log").read_text().splitlines() + (
        LOGS / "torch_npu-EE9999-hbm-ecc-507054.log"
    ).read_text().splitlines()
    assert [d.id for d in diagnose(lines)] == ["RT507054", "HEADLESS_NO_FRONTEND"]


def test_it_drops_engine_dead_and_notify_timeout_behind_a_cqe_error() -> None:
    text = (LOGS / "multi-rank-cqe-cascade.log").read_text()
    assert "EngineDeadError" in text and "[TaskExecStage][Timeout]" in text
    assert _ids(LOGS / "multi-rank-cqe-cascade.log") == ["EI0013"]


def test_it_names_the_unknown_flag_and_the_missing_model() -> None:
    [flag] = diagnose(
        (LOGS / "vllm-unrecognized-arguments.log").read_text().splitlines()
    )
    assert "--num-scheduler-steps 8" in flag.cause
    [model] = diagnose((LOGS / "vllm-model-path-missing.log").read_text().splitlines())
    assert "'/data/models/Qwen3.5-397B-A17B'" in model.cause
    assert "/data/models/Qwen3.5-397B-A17B/config.json" in model.fix


def test_it_tells_how_to_shrink_memory_on_oom() -> None:
    [d] = diagnose((LOGS / "vllm-npu-out-of-memory.log").read_text().splitlines())
    for knob in (
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-model-len",
        "add nodes",
    ):
        assert knob in d.fix


def test_it_finds_nothing_in_a_healthy_log() -> None:
    lines = [
        "INFO 12-02 18:40:47 [api_server.py:1885] vLLM API server version 0.23.0",
        'INFO:     127.0.0.1:40312 - "GET /health HTTP/1.1" 200 OK',
    ]
    assert diagnose(lines) == []


def test_it_has_a_complete_bilingual_table() -> None:
    table = load_table()
    ids = [s.id for s in table.signatures]
    assert len(ids) == len(set(ids))
    for sig in table.signatures:
        assert sig.cause and sig.fix and sig.cause_zh and sig.fix_zh, sig.id
        assert sig.severity in ("critical", "error", "warning"), sig.id
        for other in sig.supersedes:
            assert other in table.by_id, f"{sig.id} supersedes unknown {other}"


def test_it_prints_json_from_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engine.diagnose", "--json",
         str(LOGS / "hccp-EJ0003-port-bound.log")],
        capture_output=True, text=True, timeout=60, cwd=str(REPO),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [d] = json.loads(done.stdout)
    assert d["id"] == "EJ0003" and d["line"] == 3 and d["fix_zh"]


def test_it_reads_stdin_and_prints_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr(
        sys, "stdin", io.StringIO((LOGS / "vllm-engine-dead.log").read_text())
    )
    assert main(["-", "--lang", "zh-Hans"]) == 0
    out = capsys.readouterr().out
    assert "ENGINE_DEAD" in out and "引擎核心已退出" in out


# signatures added with their primary sources (issue 19); each has a real fixture above
SOURCED = (
    "DCMI_DEVICE_BUSY", "ZMQ_ADDR_IN_USE", "KV_CACHE_NO_MEMORY", "KV_CACHE_TOO_SMALL",
    "ENGINE_READY_TIMEOUT", "DIST_STORE_TIMEOUT", "ACL_GRAPH_CAPTURE", "HCCL_FFTS_TIMEOUT",
)  # fmt: skip


def test_it_cites_a_primary_source_for_each_new_signature() -> None:
    raw = json.loads((REPO / "engine" / "signatures.json").read_text())
    by_id = {entry["id"]: entry for entry in raw["signatures"]}
    for sig_id in SOURCED:
        sources = by_id[sig_id].get("sources", [])
        assert sources and all(s.startswith("https://") for s in sources), sig_id


def test_it_names_the_timeout_of_an_fftsplus_timeout_and_points_elsewhere() -> None:
    [d] = diagnose(
        (REAL / "lmdeploy-3354-hccl-fftsplus-task-timeout.txt").read_text().splitlines()
    )
    assert "HCCL_EXEC_TIMEOUT" in d.cause and "another rank" in d.cause
    assert "earliest error across all nodes" in d.fix


def test_it_drops_the_fftsplus_timeout_behind_the_cqe_error_it_follows() -> None:
    lines = (
        (REAL / "lmdeploy-3354-hccl-fftsplus-task-timeout.txt").read_text().splitlines()
    )
    lines += (REAL / "hccl-EI0013-error-cqe-plog.txt").read_text().splitlines()
    assert [d.id for d in diagnose(lines)] == ["EI0013"]


def test_it_tells_zmq_port_clash_apart_from_a_hccl_port_clash() -> None:
    [d] = diagnose(
        (REAL / "vllm-ascend-8938-zmq-address-in-use.txt").read_text().splitlines()
    )
    assert "tcp://33.215.119.7:20013" in d.cause and "ss -ltnp" in d.fix
    assert _ids(LOGS / "vllm-api-address-in-use.log") == ["EJ0003"]


def test_it_names_the_dcmi_code_and_the_container_devices() -> None:
    [d] = diagnose(
        (REAL / "npu-smi-dcmi-8020-device-used.txt").read_text().splitlines()
    )
    assert "ret -8020" in d.cause and "/dev/davinci_manager" in d.fix


def test_it_maps_capture_mode_runtime_codes_to_acl_graph_capture() -> None:
    [d] = diagnose(["synchronized memcpy failed, kind = 2, runtime result = 107030"])
    assert d.id == "ACL_GRAPH_CAPTURE" and "--enforce-eager" in d.fix


def test_it_says_to_raise_engine_ready_timeout_only_after_other_errors() -> None:
    [d] = diagnose(
        (REAL / "vllm-ascend-3800-engine-ready-timeout.txt").read_text().splitlines()
    )
    assert "VLLM_ENGINE_READY_TIMEOUT_S" in d.fix and "ENGINE_HEALTH_TIMEOUT_S" in d.fix
    both = (REAL / "vllm-ascend-3800-engine-ready-timeout.txt").read_text().splitlines()
    both += (REAL / "npu-smi-dcmi-8005-in-container.txt").read_text().splitlines()
    assert [x.id for x in diagnose(both)] == [
        "DCMI_DEVICE_BUSY",
        "ENGINE_READY_TIMEOUT",
    ]
