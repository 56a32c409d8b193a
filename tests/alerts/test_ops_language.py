"""Issue 21 point 2: a zh-Hans reader sees operational content in zh-Hans.

What workers and rules write (preflight checks, step summaries, alert rule names and
messages, remediation decisions, the failback reason) is produced here by the real
writers, and the pages are rendered in zh-Hans; no sentence of the English catalogue
(console/opsmessages.py, console/opschecks.py, monitoring/opstext.py) may appear.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import socket
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone, translation
from rest_framework.test import APIClient

from console.models import Cluster, ClusterState, Node, Operation, OperationStep
from console.opschecks import CHECKS, check, render_check
from console.opsmessages import MESSAGES, render
from console.services.runbooks.remedies import NO_BASELINE
from engine import compat
from engine.link_verify import verify_link_switch
from engine.preflight import Check, check_model, check_ports
from monitoring import remediation
from monitoring.alerts.evaluation import _message
from monitoring.models import Alert, AlertRule, Incident

pytestmark = pytest.mark.django_db

_PARAM = re.compile(r"\{\w+\}")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+(?:\s+[A-Za-z0-9()'./-]+)+")


def english_sentences() -> set[str]:
    """The literal pieces (two words or more) of every English form whose zh-Hans
    translation does not keep them (commands and tool names stay as they are)."""
    forms = set(MESSAGES.values()) | {f for entry in CHECKS.values() for f in entry}
    out = set()
    with translation.override("zh-hans"):
        for form in forms:
            if not form:
                continue
            zh = translation.gettext(form)
            for piece in _PARAM.split(form):
                piece = piece.strip(" :;,.()")
                if _WORDS.fullmatch(piece) and piece not in zh:
                    out.add(piece)
    return out


def zh_page(client: Client, url: str) -> str:
    """The page in zh-Hans as text: markup and the ops catalogue's JSON taken out."""
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 200, url
    body = response.content.decode()
    assert 'lang="zh-hans"' in body.lower() or "zh-hans" in body.lower()
    body = re.sub(
        r'<script[^>]*type="application/json"[^>]*>.*?</script>', "", body, flags=re.S
    )
    body = re.sub(r"<[^>]+>", " ", body)
    return html.unescape(body)


def untranslated(text: str) -> list[str]:
    return sorted(s for s in english_sentences() if s in text)


def _busy_port() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def test_it_renders_preflight_checks_by_id_with_their_params() -> None:
    holder, port = _busy_port()
    try:
        busy = check_ports("127.0.0.1", [port]).to_dict()
    finally:
        holder.close()
    hbm = Check.of(
        "hbm_free.busy_pids", "fail", busy="NPU 0: 30000/65536 MB", pids=[10484]
    ).to_dict()
    assert hbm["evidence"] == "HBM in use: NPU 0: 30000/65536 MB (pids [10484])"
    assert busy["id"] == "ports_free.busy" and busy["params"]["ports"].startswith(
        f"127.0.0.1:{port} ("
    )
    with translation.override("zh-hans"):
        assert render_check(hbm) == {
            "name": "HBM 空闲",
            "evidence": "HBM 已被占用：NPU 0: 30000/65536 MB（进程 [10484]）",
            "fix": "启动前先停止占用 NPU 的进程（旧的 vLLM？）。",
        }
        shown = render_check(busy)
        # the raw tool output stays, the sentence around it is translated
        assert shown["name"] == "端口空闲" and f"127.0.0.1:{port}" in shown["evidence"]
        assert shown["fix"].startswith("停止在该端口监听的进程")
        # a row stored before ids: matched by its English
        assert render_check(
            {"name": "npu count", "evidence": "3 NPUs found, inventory says 8"}
        ) == {
            "name": "NPU 数量",
            "evidence": "发现 3 个 NPU，资产清单记录为 8 个",
            "fix": "",
        }
        assert (
            render_check(
                check(
                    "version.differs",
                    "fail",
                    key="cann",
                    value="8.1",
                    node="a",
                    detail="8.2 on b",
                )
            )["evidence"]
            == "a 上的 cann 为 8.1；其他节点：8.2 on b"
        )
    with translation.override("en"):
        assert render_check(hbm)["evidence"] == hbm["evidence"]


def test_every_check_form_has_a_zh_hans_translation() -> None:
    with translation.override("zh-hans"):
        missing = [
            form
            for entry in CHECKS.values()
            for form in entry
            if form
            and _PARAM.sub("", form).strip(" :;,.()=")
            and translation.gettext(form) == form
        ]
    assert missing == []


def _preflight_checks() -> list[dict[str, Any]]:
    """Passing, warning and failing checks, from the real writers."""
    holder, port = _busy_port()
    try:
        busy = check_ports("127.0.0.1", [port]).to_dict()
    finally:
        holder.close()
    free = check_ports("127.0.0.1", [port]).to_dict()
    no_model, _, _ = check_model("")
    return [
        free,
        busy,
        no_model.to_dict(),
        compat.check({}, ""),
        compat.check({"vllm_ascend": "0.0.1"}, "0.0.1"),
        check("agent_reachable.ok", "pass", hostname="ascend-01", pid=42, driver="sim"),
        check(
            "version.differs",
            "fail",
            key="cann",
            value="8.1",
            node="ascend-01",
            detail="8.2 on ascend-02",
        ),
        # stored before checks had ids: English only
        {
            "name": "npu count",
            "status": "fail",
            "evidence": "3 NPUs found, inventory says 8",
            "fix": "Fix the node's NPU count in the inventory or find the missing NPU (npu-smi info -l).",
        },
    ]


def test_the_operation_page_shows_preflight_in_chinese(
    cluster: Cluster, viewer: Any
) -> None:
    from tests.conftest import login

    checks = _preflight_checks()
    assert {c["status"] for c in checks} == {"pass", "warn", "fail"}
    node = cluster.ranked_nodes()[0]
    op = Operation.objects.create(
        cluster=cluster,
        kind="start",
        state="failed",
        reason=f"fail back to HCCS: {node.name}",
    )
    OperationStep.objects.create(
        operation=op,
        seq=1,
        name="Agents reachable",
        state="succeeded",
        summary="4 agents answered",
    )
    OperationStep.objects.create(
        operation=op,
        seq=2,
        name=f"Preflight checks on {node.name}",
        node=node,
        state="failed",
        data={"checks": checks},
        summary="; ".join(
            f"{c['name']}: {c['evidence']}" for c in checks if c["status"] == "fail"
        ),
    )
    OperationStep.objects.create(
        operation=op,
        seq=3,
        name="Same versions and model on every node",
        state="succeeded",
        summary="identical on every node",
    )
    page = zh_page(login(viewer), f"/operations/{op.pk}/")
    assert "端口空闲" in page and "代理可达" in page and "切回 HCCS" in page
    assert untranslated(page) == []


def test_incident_alert_and_failback_pages_show_no_english_catalogue_sentence(
    cluster: Cluster, operator: Any
) -> None:
    """A failover that cannot be verified, the spare's replacement, recovery, the alert
    resolving, then an operator's failback: every step written by the real code."""
    from tests.conftest import login

    node = cluster.ranked_nodes()[2]
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    cluster.nodes.update(detected_server_model="atlas-200t-a2-box16")
    rule = AlertRule.objects.get(name="HCCS link loss")
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        node=node,
        target=node.name,
        state="firing",
        severity="warning",
        value=30.0,
        message=_message(rule, node.name, 30.0),
        fault_onset_at=now - timedelta(seconds=9),
        pending_at=now,
        fired_at=now,
    )
    verdict = verify_link_switch(NO_BASELINE, NO_BASELINE)
    failover = Operation.objects.create(
        cluster=cluster,
        kind="failover",
        state="succeeded",
        started_at=now,
        finished_at=now + timedelta(seconds=8),
        result={
            "verification": {
                **verdict.to_dict(),
                "node": node.name,
                "window_s": 4.0,
                "detail": verdict.reason,
            }
        },
    )
    incident = Incident.objects.create(
        alert=alert,
        cluster=cluster,
        node=node,
        action="failover",
        policy="auto",
        state="running",
        fault_onset_at=alert.fault_onset_at,
        detected_at=now,
        operation_ids=[failover.pk],
        operation=failover,
    )
    remediation.operation_finished(
        failover.pk
    )  # cannot verify → replace with the spare
    incident.refresh_from_db()
    replace = incident.operation
    assert replace is not None and replace.kind == "replace"
    Operation.objects.filter(pk=replace.pk).update(
        state="succeeded",
        started_at=now,
        finished_at=now + timedelta(seconds=30),
        result={"replace": {"spare": "ascend-05"}},
    )
    remediation.operation_finished(replace.pk)
    Alert.objects.filter(pk=alert.pk).update(
        state="resolved", resolved_at=now + timedelta(seconds=40)
    )
    alert.refresh_from_db()
    remediation.alert_resolved(alert)
    incident.refresh_from_db()
    kinds = [e.data.get("decision") for e in alert.events.all()]
    # the replaced node's alert ends with it ("… was replaced by … and is out of service")
    assert {"verify", "remedy", "operation", "recovered"} <= set(kinds), kinds
    # the operator fails a node on RoCE back to HCCS (the reason the service writes)
    other = cluster.ranked_nodes()[1]
    Node.objects.filter(pk=other.pk).update(
        link_mode="roce", link_mode_since=now, link_mode_reason="HCCS loss 20 %"
    )
    client = APIClient()
    client.force_authenticate(operator)
    created = client.post(f"/api/clusters/{cluster.name}/failback/", {}, format="json")
    assert created.status_code == 201, created.content
    failback = Operation.objects.get(pk=created.json()["id"])
    assert failback.reason.startswith("fail back to HCCS")

    browser = login(operator)
    pages = {
        "incident": zh_page(browser, f"/alerts/incidents/{incident.pk}/"),
        "alert": zh_page(browser, f"/alerts/{alert.pk}/"),
        "alerts": zh_page(browser, "/alerts/"),
        "incidents": zh_page(browser, "/alerts/incidents/"),
        "failback": zh_page(browser, f"/operations/{failback.pk}/"),
    }
    assert "HCCS 链路丢包" in pages["alert"] and "HCCS 链路丢包" in pages["alerts"]
    assert "无法验证" in pages["incident"] and "切回 HCCS" in pages["failback"]
    for name, text in pages.items():
        for s in untranslated(text):
            i = text.index(s)
            print(name, repr(text[max(0, i - 200) : i + 200]))
    assert {name: untranslated(text) for name, text in pages.items()} == {
        name: [] for name in pages
    }


def test_a_rule_name_an_admin_typed_is_shown_as_typed() -> None:
    with translation.override("zh-hans"):
        assert render("HCCS link loss") == "HCCS 链路丢包"
        assert render("HCCS link loss on rack 7") == "HCCS link loss on rack 7"


def run_format_js(catalogue: dict[str, Any], expression: str) -> Any:
    """Evaluate ``expression`` with static/console/js/format.js loaded in node, on the
    page's catalogue; returns its JSON value."""
    node = shutil.which("node")
    assert node, "node is needed to run format.js (Debian: apt-get install nodejs)"
    script = Path(__file__).resolve().parents[2] / "static/console/js/format.js"
    harness = (
        "var catalog = " + json.dumps(catalogue) + ";\n"
        "globalThis.window = globalThis;\n"
        "globalThis.document = { cookie: '', documentElement: { getAttribute: function () { return 'UTC'; } },"
        " getElementById: function (id) { return id === 'ops-catalog' ? { textContent: JSON.stringify(catalog) } : null; } };\n"
        + script.read_text(encoding="utf-8")
        + "\nconsole.log(JSON.stringify("
        + expression
        + "));\n"
    )
    out = subprocess.run(
        [node, "-e", harness], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_format_js_renders_a_pushed_check_and_rule_name_like_the_server() -> None:
    """static/console/js/format.js (consoleFormat.check / .msg) against the catalogue the
    page carries, in node: the same zh-Hans text as console/opschecks.render_check."""
    from console.opsmessages import catalog_for_js

    with translation.override("zh-hans"):
        catalogue = catalog_for_js()
    hbm = Check.of(
        "hbm_free.busy_pids", "fail", busy="NPU 0: 30000/65536 MB", pids=[10484]
    ).to_dict()
    with translation.override("zh-hans"):
        expected = render_check(hbm)
    out = run_format_js(
        catalogue,
        "[consoleFormat.check("
        + json.dumps(hbm)
        + "), consoleFormat.msg('HCCS link loss'), consoleFormat.msg('My rule')]",
    )
    check_js, rule_js, typed_js = out
    assert check_js == expected
    assert rule_js == "HCCS 链路丢包" and typed_js == "My rule"


def test_every_seeded_rule_name_is_in_the_catalogue() -> None:
    from monitoring.alerts.catalog import DEFAULT_RULES
    from monitoring.alerts.gate import RULE_NAME
    from monitoring.opstext import RULE_NAMES

    assert {str(r["name"]) for r in DEFAULT_RULES} | {RULE_NAME} == set(RULE_NAMES)
