"""Evidence bundles on the console: size bound, retention, download and collect permissions, the panel."""

from __future__ import annotations

import io
import tarfile
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from console.models import AuditEvent, EvidenceBundle
from console.services import evidence as svc
from tests.conftest import login

pytestmark = pytest.mark.django_db

CRASH = (
    "[ERROR] RUNTIME(5150,python3):2026-12-04-16:30:01.250.000 [api_c.cc:1580]5224 "
    "rtDeviceSynchronizeWithTimeout:ErrCode=507015, desc=[aicore exception], InnerCode=0x715002a\n"
)
DEAD = (
    "(APIServer pid=9) ERROR 12-04 16:30:02 [async_llm.py:480] "
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n"
)


def _answer(node: str, files: dict[str, str]) -> dict[str, Any]:
    return {
        "node": node,
        "collected_at": 0,
        "skipped": [],
        "files": [
            {"name": k, "text": v, "size": len(v), "truncated": False, "source": "t"}
            for k, v in files.items()
        ],
    }


@pytest.fixture
def agents_answer(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What each node's agent answers to node.evidence (the agents themselves are
    exercised end to end in tests/alerts/test_evidence_incident.py)."""
    answers: dict[str, Any] = {}

    def fake_call(node: Any, task: str, **kwargs: Any) -> Any:
        assert task == "node.evidence" and 1 <= kwargs["log_lines"] <= 5000
        value = answers[node.name]
        if isinstance(value, Exception):
            raise value
        return value

    monkeypatch.setattr(svc, "agent_call", fake_call)
    return answers


def test_it_stores_a_bundle_with_cross_node_findings_and_an_audit_row(
    cluster: Any, agents_answer: dict[str, Any]
) -> None:
    nodes = cluster.ranked_nodes()
    for n in nodes:
        agents_answer[n.name] = _answer(n.name, {"engine.log": "ok\n"})
    agents_answer[nodes[0].name] = _answer(nodes[0].name, {"engine.log": DEAD})
    agents_answer[nodes[2].name] = _answer(
        nodes[2].name, {"engine.log": "", "plog/plog-5150_20261204163001250.log": CRASH}
    )
    agents_answer[nodes[3].name] = svc.AgentUnreachable("no answer from node 4")
    bundle = svc.evidence_collect(cluster=cluster, trigger="manual", reason="test")
    assert [n["ok"] for n in bundle.nodes] == [True, True, True, False]
    assert "no answer from node 4" in bundle.nodes[3]["error"]
    first = bundle.first_finding
    assert first and first["node"] == nodes[2].name and first["id"] == "RT507015"
    assert [f["node"] for f in bundle.findings] == [nodes[2].name, nodes[0].name]
    with tarfile.open(fileobj=io.BytesIO(bytes(bundle.archive)), mode="r:gz") as tar:
        names = tar.getnames()
    root = names[0].split("/")[0]
    assert f"{root}/{nodes[2].name}/plog/plog-5150_20261204163001250.log" in names
    assert f"{root}/findings.json" in names and f"{root}/MANIFEST.json" in names
    row = AuditEvent.objects.get(action="evidence.collect")
    assert row.after["first"] == f"{nodes[2].name}: RT507015"


def test_it_refuses_unsafe_file_names_from_an_agent(
    cluster: Any, agents_answer: dict[str, Any]
) -> None:
    for n in cluster.ranked_nodes():
        agents_answer[n.name] = _answer(
            n.name,
            {
                "engine.log": "x\n",
                "../../etc/passwd": "root",
                "/abs": "y",
                "a/b/c": "z",
            },
        )
    bundle = svc.evidence_collect(cluster=cluster, trigger="manual")
    assert all([f["name"] for f in n["files"]] == ["engine.log"] for n in bundle.nodes)


def test_it_bounds_the_archive_by_dropping_the_largest_plogs(
    cluster: Any, agents_answer: dict[str, Any], settings: Any
) -> None:
    import os

    settings.EVIDENCE_MAX_BYTES = 100_000
    noise = os.urandom(150_000).hex()  # incompressible
    for n in cluster.ranked_nodes():
        agents_answer[n.name] = _answer(
            n.name, {"engine.log": DEAD, "plog/plog-1_20261204163001250.log": noise}
        )
    bundle = svc.evidence_collect(cluster=cluster, trigger="manual")
    assert bundle.size_bytes <= 100_000
    assert all(
        n["skipped"] == ["plog/plog-1_20261204163001250.log"] for n in bundle.nodes
    )
    assert all([f["name"] for f in n["files"]] == ["engine.log"] for n in bundle.nodes)


def test_it_deletes_bundles_past_the_retention(cluster: Any, settings: Any) -> None:
    settings.EVIDENCE_RETENTION_DAYS = 7
    old = EvidenceBundle.objects.create(
        cluster=cluster,
        trigger="manual",
        archive=b"",
        created_at=timezone.now() - timedelta(days=8),
    )
    new = EvidenceBundle.objects.create(cluster=cluster, trigger="manual", archive=b"")
    assert svc.evidence_purge() == 1
    assert list(EvidenceBundle.objects.values_list("pk", flat=True)) == [new.pk]
    assert not EvidenceBundle.objects.filter(pk=old.pk).exists()


def test_a_hook_never_raises(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(**_: Any) -> None:
        raise RuntimeError("broker down")

    monkeypatch.setattr(svc, "evidence_collect", boom)
    assert svc.evidence_collect_safe(cluster=cluster, trigger="manual") is None


def _bundle(cluster: Any) -> EvidenceBundle:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"hello"
        info = tarfile.TarInfo("evidence-x/ascend-01/engine.log")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return EvidenceBundle.objects.create(
        cluster=cluster,
        trigger="manual",
        archive=buf.getvalue(),
        size_bytes=len(buf.getvalue()),
        nodes=[
            {
                "node": "ascend-03",
                "ok": True,
                "error": "",
                "files": [{"name": "engine.log"}],
            }
        ],
        findings=[
            {
                "node": "ascend-03",
                "file": "plog/p",
                "line": 1,
                "time": 1.0,
                "id": "RT507015",
                "severity": "error",
                "specificity": 70,
                "cause": "AICore exception",
                "fix": "replace",
                "cause_zh": "",
                "fix_zh": "",
                "evidence": "ErrCode=507015",
                "first": True,
            },
        ],  # fmt: skip
    )


def test_operators_download_the_tar_and_viewers_cannot(
    cluster: Any, operator: Any, viewer: Any
) -> None:
    bundle = _bundle(cluster)
    url = f"/evidence/{bundle.pk}/download/"
    got = login(operator).get(url)
    assert got.status_code == 200 and got["Content-Type"] == "application/gzip"
    assert bundle.filename in got["Content-Disposition"]
    with tarfile.open(fileobj=io.BytesIO(got.content), mode="r:gz") as tar:
        assert tar.extractfile("evidence-x/ascend-01/engine.log").read() == b"hello"
    assert login(viewer).get(url).status_code == 403
    assert Client().get(url).status_code == 302


def test_the_cluster_page_shows_findings_to_viewers_without_download(
    cluster: Any, viewer: Any, operator: Any
) -> None:
    bundle = _bundle(cluster)
    page = login(viewer).get(f"/clusters/{cluster.name}/").content.decode()
    assert "first-fault" in page and "RT507015" in page and "ascend-03" in page
    assert (
        f"/evidence/{bundle.pk}/download/" not in page
        and "evidence-collect" not in page
    )
    page = login(operator).get(f"/clusters/{cluster.name}/").content.decode()
    assert (
        f"/evidence/{bundle.pk}/download/" in page and 'id="evidence-collect"' in page
    )


def test_collect_now_enqueues_and_refuses_a_bad_incident(
    cluster: Any,
    operator: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from console import tasks

    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.evidence_collect_task, "delay", lambda *a: sent.append(a))
    c = login(operator)
    bad = c.post(
        f"/clusters/{cluster.name}/evidence/",
        {"incident": "12; drop"},
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert (
        bad.status_code == 400 and b"incident must be an incident number" in bad.content
    )
    with django_capture_on_commit_callbacks(execute=True):
        ok = c.post(
            f"/clusters/{cluster.name}/evidence/",
            {"incident": "7", "next": "https://evil.example/"},
        )
    assert ok.status_code == 302 and ok["Location"] == f"/clusters/{cluster.name}/"
    assert sent == [(cluster.pk, 7, operator.pk)]


def test_the_collect_task_stores_an_on_demand_bundle_for_the_incident(
    cluster: Any, operator: Any, agents_answer: dict[str, Any]
) -> None:
    from console.tasks import evidence_collect_task

    for n in cluster.ranked_nodes():
        agents_answer[n.name] = _answer(n.name, {"engine.log": DEAD})
    pk = evidence_collect_task(cluster.pk, 7, operator.pk)
    bundle = EvidenceBundle.objects.get(pk=pk)
    assert bundle.trigger == "manual" and bundle.incident_id == 7
    assert bundle.created_by == operator and operator.username in bundle.reason
    row = AuditEvent.objects.get(action="evidence.collect")
    assert row.actor == operator
    assert evidence_collect_task(999_999, None, None) is None


def test_the_runbook_hook_collects_for_failed_starts_and_incident_remedies_only(
    cluster: Any, agents_answer: dict[str, Any]
) -> None:
    from console.models import Operation

    nodes = list(cluster.ranked_nodes())
    for n in nodes:
        agents_answer[n.name] = _answer(n.name, {"engine.log": DEAD})

    def op(kind: str, **params: Any) -> Operation:
        return Operation.objects.create(
            cluster=cluster,
            kind=kind,
            params=params,
            state="failed",
            finished_at=timezone.now(),
        )

    svc.evidence_for_runbook(op("stop"), nodes, failed=True)
    svc.evidence_for_runbook(op("restart"), nodes, failed=False)  # no incident
    svc.evidence_for_runbook(
        op("start", remedy=True, scale_out_of="x"), nodes, failed=False
    )
    assert EvidenceBundle.objects.count() == 0
    failed = op("start")
    svc.evidence_for_runbook(failed, nodes, failed=True)
    remedy = op("restart", remedy=True)
    svc.evidence_for_runbook(remedy, nodes, failed=False)
    got = {
        (b.trigger, b.operation_id, b.incident_id) for b in EvidenceBundle.objects.all()
    }
    # the incident finds the remedy's bundle through its operations (Incident.operation)
    assert got == {("operation_failed", failed.pk, None), ("remedy", remedy.pk, None)}


def test_an_engine_exit_enqueues_a_collection_after_commit(
    cluster: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from console import tasks

    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.evidence_collect_task, "delay", lambda *a: sent.append(a))
    with django_capture_on_commit_callbacks(execute=True):
        svc.evidence_on_engine_exit({cluster.pk, 0})
        assert sent == []  # nothing before the round commits
    assert sent == [(cluster.pk, None, None, "engine_exited")]


def test_a_remedy_reuses_the_bundle_taken_when_the_engine_exited(
    cluster: Any, agents_answer: dict[str, Any]
) -> None:
    from console.models import Operation

    nodes = list(cluster.ranked_nodes())
    for n in nodes:
        agents_answer[n.name] = _answer(n.name, {"engine.log": DEAD})
    exit_bundle = svc.evidence_collect(cluster=cluster, trigger="engine_exited")
    remedy = Operation.objects.create(
        cluster=cluster, kind="restart", params={"remedy": True}
    )
    svc.evidence_for_runbook(remedy, nodes, failed=False)
    assert EvidenceBundle.objects.count() == 1
    exit_bundle.refresh_from_db()
    assert exit_bundle.operation_id == remedy.pk
