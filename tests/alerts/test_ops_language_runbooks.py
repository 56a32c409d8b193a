"""Issue 21 point 2, continued: what the runbooks write beyond preflight — remedy and
verify steps, verify-weights, benchmarks — and the detail lists written deeper in
engine/ (release-matrix mismatches, server-model evidence, model-file problems, ping
loss) read in zh-Hans, with no sentence of the English catalogue left.

Everything below is written by the real writers (the runbook functions, the engine's
check and item functions) on real rows; only agents are absent, so the steps that need
one are left out or fail the way they do without one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone, translation

from console.models import BenchmarkRun, Cluster, Node, Operation
from console.opschecks import check, render_check
from console.opsmessages import catalog_for_js, english_text, message, render
from console.services.runbooks import bench as bench_runbook
from console.services.runbooks import lifecycle, remedies
from console.services.runbooks import weights as weights_runbook
from console.services.runbooks.base import Run, StepFailed
from console.services.runbooks.remedies import NO_BASELINE, verify_summary
from console.services.weights import cross_node_checks
from engine import compat, weights
from engine.checktext import item, join
from engine.link_verify import verify_link_switch
from engine.parsers.server_model import detect_server_model
from engine.preflight import Check
from tests.alerts.test_ops_language import run_format_js, untranslated, zh_page
from tests.conftest import login

pytestmark = pytest.mark.django_db

BENCH_RESULT = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "vllm"
    / "bench-serve-save-result.json"
)


def _failed(fn: Any, *args: Any) -> StepFailed:
    with pytest.raises(StepFailed) as caught:
        fn(*args)
    return caught.value


def _operation(cluster: Cluster, kind: str, **params: Any) -> tuple[Operation, Run]:
    op = Operation.objects.create(
        cluster=cluster,
        kind=kind,
        state="running",
        started_at=timezone.now(),
        params=params,
    )
    return op, Run(op)


def _end(op: Operation, exc: StepFailed | None = None) -> None:
    """What the runner stores when the runbook ends (runner.py operation_terminate)."""
    Operation.objects.filter(pk=op.pk).update(
        state="failed" if exc else "succeeded",
        error=str(exc) if exc else "",
        finished_at=timezone.now(),
    )


def _benchmark(tmp_path: Path, cluster: Cluster, **changes: Any) -> BenchmarkRun:
    raw = json.loads(BENCH_RESULT.read_text())
    raw.update(changes)
    path = tmp_path / f"run-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(raw))
    call_command("bench", "import", str(path), "--cluster", cluster.name)
    return BenchmarkRun.objects.order_by("-pk").first()  # type: ignore[return-value]


def remedy_operation(cluster: Cluster) -> Operation:
    """A replacement whose spare cannot be found (the remedy step fails), with the
    verify step of the failover before it and a spare of another server model."""
    node = cluster.ranked_nodes()[2]
    op, run = _operation(cluster, "replace", node=node.name, spare="no-such-spare")
    verify = run.add_step(
        f"Verify the switch on {node.name}: HCCS counters still, RoCE counters growing",
        node,
    )
    run.begin(verify)
    verdict = verify_link_switch(NO_BASELINE, NO_BASELINE)
    run.finish(verify, verify_summary(verdict.status, verdict.reason), state="warning")
    spare = run.add_step(f"Preflight on the spare {node.name}", node)
    run.begin(spare)
    checks = [
        check(
            "server_model.spare_differs",
            "fail",
            spare="ascend-05",
            model="atlas-800t-a3",
            old=node.name,
            want="atlas-200t-a2-box16",
        )
    ]
    run.fail(
        spare,
        "; ".join(f"{c['name']}: {c['evidence']}" for c in checks),
        data={"checks": checks},
    )
    _end(op, _failed(remedies.replace_prepare, run))
    return op


def weights_operation(cluster: Cluster, tmp_path: Path) -> Operation:
    """verify-weights: two nodes hold different files (the compare step fails)."""
    op, run = _operation(cluster, "verify_weights")
    rows = weights_runbook.weights_rows(run)
    nodes = list(rows["nodes"])
    manifests = {}
    for i, name in enumerate(nodes):
        root = tmp_path / name
        root.mkdir()
        (root / "config.json").write_text('{"architectures": ["X"]}')
        (root / "model.safetensors").write_bytes(b"w" * (10 + (i == 1)))
        m = weights.manifest(root)
        m["sha256"] = {f: f"{i}{f}" * 8 for f in m["files"]}
        manifests[name] = m
        run.begin(rows["nodes"][name])
        run.finish(  # the summary run_weights writes from the agent's answer
            rows["nodes"][name],
            message("summary.hashed", files=2, size="0 MiB", cached=0, read="0 MiB"),
        )
    exc = _failed(weights_runbook._compare, run, rows["compare"], manifests, [])
    _end(op, exc)
    return op


def benchmark_operation(cluster: Cluster, tmp_path: Path) -> Operation:
    """benchmark: two points, one far below the profile's target (not accepted)."""
    points = [
        {"max_concurrency": 8, "request_rate": None},
        {"max_concurrency": 8, "request_rate": None},
    ]
    op, run = _operation(cluster, "benchmark", bench={"points": points})
    rows = bench_runbook.bench_rows(run)
    stored = [
        _benchmark(tmp_path, cluster),
        _benchmark(tmp_path, cluster, output_throughput=352.0, p99_ttft_ms=910.0),
    ]
    call_command("bench", "baseline", str(stored[0].pk))  # the second one regressed
    for row, s in zip(rows["points"], stored, strict=True):
        run.begin(row)
        run.finish(row, bench_runbook._figures(s))
    _end(op, _failed(bench_runbook.judge, run, rows["targets"], stored))
    return op


def start_operation(cluster: Cluster) -> Operation:
    """A start whose warm-up is skipped and whose smoke test finds nothing listening."""
    head = cluster.ranked_nodes()[0]
    Node.objects.filter(pk=head.pk).update(management_ip="127.0.0.1", api_port=9)
    op, run = _operation(cluster, "start", warmup_requests=0)
    warm = run.add_step("Warm-up requests")
    lifecycle.warm_up(run, warm)
    smoke = run.add_step("Smoke test: one completion")
    _end(op, _failed(lifecycle.smoke_test, run, smoke))
    return op


def test_runbook_pages_show_no_english_catalogue_sentence(
    cluster: Cluster, viewer: Any, tmp_path: Path
) -> None:
    ops = {
        "remedy": remedy_operation(cluster),
        "weights": weights_operation(cluster, tmp_path),
        "benchmark": benchmark_operation(cluster, tmp_path),
        "start": start_operation(cluster),
    }
    # the English stays in the stored text (logs, the CLI, older readers)
    summaries = {
        k: [s.summary for s in op.steps.order_by("seq")] for k, op in ops.items()
    }
    assert summaries["remedy"][0].startswith("cannot_verify: Cannot verify the switch")
    assert summaries["remedy"][-1].startswith("no idle spare with")
    assert summaries["weights"][-1].startswith("files differ: ")
    assert "bytes here" in summaries["weights"][-1]
    assert summaries["benchmark"][0].startswith(
        f"#{BenchmarkRun.objects.order_by('pk').first().pk}: "
    )
    assert "NOT ACCEPTED" in summaries["benchmark"][-1]
    assert summaries["start"] == ["skipped (0 requests)", summaries["start"][1]]
    assert summaries["start"][1].startswith("completion failed: ")

    browser = login(viewer)
    pages = {k: zh_page(browser, f"/operations/{op.pk}/") for k, op in ops.items()}
    assert "无法验证：" in pages["remedy"] and "没有可替换" in pages["remedy"]
    assert "备机必须是相同的服务器型号" in pages["remedy"]
    assert "文件不一致：" in pages["weights"] and "多数节点" in pages["weights"]
    assert (
        "并发 8 上进行基准测试" in pages["benchmark"] or "并发 8" in pages["benchmark"]
    )
    assert "未通过验收" in pages["benchmark"] and "成功 16 个" in pages["benchmark"]
    assert "已跳过（0 个请求）" in pages["start"] and "补全请求失败" in pages["start"]
    for name, text in pages.items():
        for s in untranslated(text):
            i = text.index(s)
            print(name, repr(text[max(0, i - 200) : i + 200]))
    assert {k: untranslated(t) for k, t in pages.items()} == {k: [] for k in pages}
    # the operation's error names the failed step, both parts in the reader's language
    assert "对照配置的目标检查结果：未通过验收：#1 并发 8：已验收" in pages["benchmark"]
    assert "冒烟测试：一次补全请求：补全请求失败：" in pages["start"]


def _detail_checks(tmp_path: Path, cluster: Cluster) -> list[dict[str, Any]]:
    """Checks whose evidence is a list written deeper in engine/."""
    found = {"vllm_ascend": "0.9.1", "cann": "7.0", "torch_npu": "2.1.0"}
    release = compat.check(found, "0.9.1")
    detected = detect_server_model(None, "910B3")
    server = Check.of(
        "server_model.unknown",
        "warn",
        label="unknown",
        evidence=detected.evidence_item,
        source="dmidecode -s system-product-name",
    ).to_dict()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model-00001-of-00002.safetensors"}}'
    )
    files = weights.check(weights.manifest(broken))
    missing = weights.check(weights.manifest(tmp_path / "absent"))
    ping = Check.of(
        "npu_ping.lost",
        "fail",
        problems=join([item("item.ping_lost", target="10.0.0.2", sent=3)]),
    ).to_dict()
    a, b = tmp_path / "a", tmp_path / "b"
    for root, size in ((a, 10), (b, 11)):
        root.mkdir()
        (root / "config.json").write_text('{"num_hidden_layers": 60}')
        (root / "w.safetensors").write_bytes(b"x" * size)
    answers = {
        "n1": {"weights": weights.manifest(a)},
        "n2": {"weights": weights.manifest(a)},
        "n3": {"weights": weights.manifest(b)},
    }
    cross = cross_node_checks(answers, cluster.profile)
    return [release, server, files, missing, ping, *cross["n3"]]


def test_detail_lists_inside_checks_render_item_by_item(
    cluster: Cluster, tmp_path: Path
) -> None:
    checks = _detail_checks(tmp_path, cluster)
    english = " ".join(c["evidence"] for c in checks)
    # the English text for logs and the CLI is as before
    assert "cann 7.0 (vllm-ascend 0.9.1 needs" in english
    assert "SMBIOS product name no product name names no known Atlas server" in english
    assert "chip 910B3 (910B)" in english and "missing shard(s)" in english
    assert "10.0.0.2: 3 sent, 0 received" in english and "does not exist" in english
    assert "w.safetensors: 11 bytes here, 10 bytes on most nodes" in english
    with translation.override("zh-hans"):
        shown = [render_check(c) for c in checks]
    text = " ".join(f"{t['name']} {t['evidence']} {t['fix']}" for t in shown)
    assert "cann 7.0（vllm-ascend 0.9.1 需要" in text
    assert (
        "SMBIOS 产品名称 无产品名称 不是已知的 Atlas 服务器；芯片 910B3（910B）" in text
    )
    assert "10.0.0.2：发送 3 个，收到 0 个" in text
    assert "w.safetensors：本节点 11 字节，多数节点 10 字节" in text
    assert "列出的 1 个分片缺失" in text and "不存在" in text
    assert untranslated(text) == []
    with translation.override("en"):
        assert [render_check(c)["evidence"] for c in checks] == [
            c["evidence"] for c in checks
        ]


def test_a_stored_message_keeps_its_english_for_logs() -> None:
    msg = verify_summary(
        "switched",
        "HCCS traffic fell to 3 % of the node's own "
        "baseline (10 of 300 packets/s) while traffic continued.",
    )
    assert english_text(msg).startswith("switched: HCCS traffic fell to 3 %")
    with translation.override("zh-hans"):
        assert render(msg).startswith("已切换：")
        # the English stored by an older worker reads the same
        assert render(english_text(msg)) == render(msg)


def test_format_js_renders_messages_joins_and_prose_like_the_server(
    cluster: Cluster, tmp_path: Path
) -> None:
    """consoleFormat.msg (static/console/js/format.js, run in node against the page's
    catalogue) gives what console/opsmessages.render gives: stored message dicts, joins,
    stored English, and known sentences inside longer prose (a remedy's "why")."""
    ops = [
        remedy_operation(cluster),
        weights_operation(cluster, tmp_path),
        benchmark_operation(cluster, tmp_path),
    ]
    values: list[Any] = [
        s.data.get("summary_msg") or s.summary
        for op in ops
        for s in op.steps.order_by("seq")
    ]
    values += [s.summary for op in ops for s in op.steps.order_by("seq")]
    values.append(
        "Server model: Atlas 800T A3.\n1. escalate — can work here: yes; no restart. "
        "No idle spare of the same server model (Atlas 800T A3) is available. [doc @1]"
    )
    (tmp_path / "checks").mkdir()
    checks = _detail_checks(tmp_path / "checks", cluster)
    with translation.override("zh-hans"):
        catalogue = catalog_for_js()
        expected = [render(v) for v in values]
        expected_checks = [render_check(c) for c in checks]
    assert expected[-1].startswith("服务器型号：Atlas 800T A3。")
    shown, shown_checks = run_format_js(
        catalogue,
        "["
        + json.dumps(values)
        + ".map(consoleFormat.msg), "
        + json.dumps(checks)
        + ".map(consoleFormat.check)]",
    )
    assert shown == expected
    assert shown_checks == expected_checks


def test_a_nodes_stored_detection_evidence_reads_in_zh_hans() -> None:
    """Node.detected_server_model_evidence keeps the English (the link-fault plan on the
    node page shows it through |ops)."""
    found = detect_server_model("Atlas 800I A2", "910B3")
    assert found.evidence == "SMBIOS product name 'Atlas 800I A2'; chip 910B3 (910B)."
    with translation.override("zh-hans"):
        assert render(found.evidence) == render(found.evidence_item)
        assert (
            render(found.evidence)
            == "SMBIOS 产品名称 'Atlas 800I A2'；芯片 910B3（910B）。"
        )
