"""Benchmark results: import of a real-format --save-result file, targets, baseline, compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from console.models import AuditEvent, BenchmarkRun, Cluster
from tests.conftest import login

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "vllm"
    / "bench-serve-save-result.json"
)


def _import(tmp_path: Path, cluster: Cluster, **changes: Any) -> BenchmarkRun:
    raw = json.loads(FIXTURE.read_text())
    raw.update(changes)
    path = tmp_path / f"run-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(raw))
    call_command("bench", "import", str(path), "--cluster", cluster.name)
    return BenchmarkRun.objects.order_by("-pk").first()  # type: ignore[return-value]


def test_it_imports_vllms_save_result_format(tmp_path: Path, cluster: Cluster) -> None:
    run = _import(tmp_path, cluster)
    assert run.tool == "vllm bench serve" and run.source == "import"
    assert run.completed == 16 and run.failed == 0
    assert run.total_output_tokens == 4096
    assert run.max_concurrency == 8 and run.request_rate is None  # "inf"
    assert (run.input_len, run.output_len) == (512, 256)  # from input_lens/output_lens
    assert run.npu_count == 32  # 4 × 8 NPUs of the demo cluster
    assert run.output_tps_per_npu == pytest.approx(393.3922 / 32)
    assert run.latency_ms["p99_ttft_ms"] == 648.2 and "std_e2el_ms" in run.latency_ms
    assert len(run.plan_digest) == 64 and run.engine_versions["vllm"] == "0.23.0"
    assert "ttfts" not in run.raw and "plan" in run.raw  # per-request arrays dropped
    assert AuditEvent.objects.filter(action="benchmark.store").count() == 1


def test_show_prints_a_vllm_table_and_passes_the_demo_target(
    tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _import(tmp_path, cluster)
    capsys.readouterr()
    call_command("bench", "show", str(run.pk))
    out = capsys.readouterr().out
    assert "============ Serving Benchmark Result ============" in out
    assert "Maximum request concurrency:             8" in out
    assert "P99 TTFT (ms):                           648.20" in out
    assert "PASS output_tps_per_npu: 12.29 vs 12.00 (margin +2.45%)" in out
    assert "PASS p99_ttft_ms: 648.20 vs 800.00 (margin +18.97%)" in out
    assert out.rstrip().endswith("ACCEPTED")


def test_a_slow_run_fails_the_target_with_its_margin(
    tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _import(tmp_path, cluster, output_throughput=352.0, p99_ttft_ms=910.0)
    capsys.readouterr()
    call_command("bench", "show", str(run.pk), "--json")
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["passed"] is False
    checks = {c["name"]: c for c in verdict["checks"]}
    assert checks["output_tps_per_npu"]["margin_pct"] == pytest.approx(-8.33, abs=0.01)
    assert checks["p99_ttft_ms"]["passed"] is False


def test_a_regression_against_the_baseline_fails_and_compare_names_the_plan_change(
    tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _import(tmp_path, cluster, output_throughput=420.0)
    call_command("bench", "baseline", str(base.pk))
    profile = cluster.profile
    profile.max_num_seqs = 32
    profile.save()
    worse = _import(tmp_path, cluster, output_throughput=395.0)  # −6 %, still ≥ 12/NPU
    capsys.readouterr()
    call_command("bench", "compare", str(base.pk), str(worse.pk), "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["regressed"] is True and data["same_plan"] is False
    row = next(r for r in data["figures"] if r["name"] == "output_throughput")
    assert row["delta_pct"] == pytest.approx(-5.95, abs=0.01) and row["regressed"]
    assert "ascend-01: --max-num-seqs '16' → '32'" in data["plan_diff"], data[
        "plan_diff"
    ]
    call_command("bench", "show", str(worse.pk))
    out = capsys.readouterr().out
    assert f"REGRESSED against baseline #{base.pk}" in out
    assert out.rstrip().endswith("NOT ACCEPTED")


def test_list_json_and_the_api(
    tmp_path: Path, cluster: Cluster, viewer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _import(tmp_path, cluster)
    capsys.readouterr()
    call_command("bench", "list", "--json")
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["id"] == run.pk and rows[0]["output_throughput"] == 393.3922
    client = login(viewer)
    assert client.get("/api/benchmarks/").json()[0]["p99_ttft_ms"] == 648.2
    detail = client.get(f"/api/benchmarks/{run.pk}/").json()
    assert detail["verdict"]["passed"] is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"duration": None}, "duration"),
        ({"completed": "16"}, "completed"),
        ({"date": "yesterday"}, "date"),
    ],
)
def test_a_bad_file_is_refused_naming_the_field(
    tmp_path: Path, cluster: Cluster, change: dict[str, Any], field: str
) -> None:
    raw = json.loads(FIXTURE.read_text())
    raw.update(change)
    if change.get(field, "") is None:
        del raw[field]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(CommandError, match=field):
        call_command("bench", "import", str(path))
    assert not BenchmarkRun.objects.exists()


def test_the_api_imports_for_operators_and_names_a_bad_field(
    cluster: Cluster, viewer: Any, operator: Any
) -> None:
    raw = json.loads(FIXTURE.read_text())
    url = f"/api/benchmarks/?cluster={cluster.name}"
    assert (
        login(viewer).post(url, raw, content_type="application/json").status_code == 403
    )
    made = login(operator).post(url, raw, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["verdict"]["passed"] is True
    assert made.json()["output_tps_per_npu"] == pytest.approx(12.2935, abs=1e-3)
    del raw["total_output_tokens"]
    bad = login(operator).post(url, raw, content_type="application/json")
    assert bad.status_code == 400 and "total_output_tokens" in bad.json()
    assert BenchmarkRun.objects.count() == 1
