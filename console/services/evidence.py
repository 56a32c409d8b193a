"""Collect evidence bundles from every node of a cluster, diagnose them together, store them.

``evidence_collect`` asks each node's agent for ``node.evidence`` in parallel, diagnoses
all answers together (engine.findings: earliest error across nodes first), packs one
tar.gz no larger than ``EVIDENCE_MAX_BYTES`` and stores it with its operation and/or
incident, with an audit row in the same transaction. ``evidence_collect_safe`` is the
form the hooks call: it never raises (a failure to collect must not hide the failure
being investigated).
"""

from __future__ import annotations

import functools
import io
import json
import logging
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.models import (
    Cluster,
    EvidenceBundle,
    EvidenceTrigger,
    Node,
    Operation,
    OperationKind,
)
from console.services.agents import AgentUnreachable, agent_call
from console.services.audit import audit_record
from engine.evidence import MAX_LOG_LINES
from engine.findings import cross_node_findings

log = logging.getLogger(__name__)
# Never dropped to fit the size bound: without them the bundle says nothing.
KEEP_FILES = ("engine.log", "npu-smi-info.txt")
# A bundle the engine-exit hook took this recently stands for the incident's remedy.
EXIT_BUNDLE_REUSE_S = 120
# Operations that start engines: their failure (or their incident) gets a bundle.
START_KINDS = (
    OperationKind.START,
    OperationKind.RESTART,
    OperationKind.FAILOVER,
    OperationKind.REPLACE,
)


def _ask(node: Node) -> dict[str, Any]:
    try:
        answer = agent_call(
            node,
            "node.evidence",
            timeout=settings.EVIDENCE_AGENT_TIMEOUT_S,
            log_lines=min(settings.EVIDENCE_LOG_LINES, MAX_LOG_LINES),
        )
    except AgentUnreachable as exc:
        return {"node": node.name, "ok": False, "error": str(exc), "files": []}
    except Exception as exc:  # the agent refused or failed: say so, keep the others
        return {"node": node.name, "ok": False, "error": repr(exc)[:500], "files": []}
    if not isinstance(answer, dict) or not isinstance(answer.get("files"), list):
        return {
            "node": node.name,
            "ok": False,
            "error": "malformed answer",
            "files": [],
        }
    files = [
        f
        for f in answer["files"]
        if isinstance(f, dict)
        and isinstance(f.get("name"), str)
        and isinstance(f.get("text"), str)
        and _safe_name(f["name"])
    ]
    return {
        "node": node.name,
        "ok": True,
        "error": "",
        "files": files,
        "skipped": [str(s) for s in answer.get("skipped") or []][:50],
        "collected_at": answer.get("collected_at"),
    }


def _safe_name(name: str) -> bool:
    """A bundle file name is ``x`` or ``plog/x``: no absolute path, no '..', no control char."""
    parts = name.split("/")
    return (
        0 < len(name) <= 200
        and len(parts) <= 2
        and all(p not in ("", ".", "..") for p in parts)
        and all(ch.isprintable() for ch in name)
    )


def _pack(
    root: str, answers: list[dict[str, Any]], findings: list[dict[str, Any]]
) -> bytes:
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size, info.mtime, info.mode = len(data), now, 0o644
            tar.addfile(info, io.BytesIO(data))

        for a in answers:
            for f in a["files"]:
                add(f"{a['node']}/{f['name']}", f["text"].encode())
        manifest = [
            {k: a.get(k) for k in ("node", "ok", "error", "skipped", "collected_at")}
            | {"files": [f["name"] for f in a["files"]]}
            for a in answers
        ]
        add("MANIFEST.json", json.dumps(manifest, indent=2).encode())
        add(
            "findings.json", json.dumps(findings, indent=2, ensure_ascii=False).encode()
        )
    return buf.getvalue()


def _fit(
    root: str, answers: list[dict[str, Any]], findings: list[dict[str, Any]]
) -> bytes:
    """Pack, dropping the largest droppable file until the archive fits EVIDENCE_MAX_BYTES."""
    while True:
        data = _pack(root, answers, findings)
        if len(data) <= settings.EVIDENCE_MAX_BYTES:
            return data
        droppable = [
            (len(f["text"]), a, f)
            for a in answers
            for f in a["files"]
            if f["name"] not in KEEP_FILES
        ]
        if not droppable:
            for a in answers:  # last resort: keep only the tails of the kept files
                for f in a["files"]:
                    f["text"] = f["text"][-65536:]
            return _pack(root, answers, findings)[: settings.EVIDENCE_MAX_BYTES]
        _, answer, biggest = max(droppable, key=lambda item: item[0])
        answer["files"].remove(biggest)
        answer.setdefault("skipped", []).append(biggest["name"])


def evidence_purge(*, now: Any = None) -> int:
    """Delete bundles older than EVIDENCE_RETENTION_DAYS; returns how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.EVIDENCE_RETENTION_DAYS)
    deleted, _ = EvidenceBundle.objects.filter(created_at__lt=cutoff).delete()
    return deleted


def _ask_all(members: list[Node]) -> list[dict[str, Any]]:
    """Every node's answer (``_ask``), asked in parallel, in ``members``' order."""
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(members)))) as pool:
        return list(pool.map(_ask, members))


def _node_rows(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the bundle row keeps of each answer: its outcome and file names, not the text."""
    return [
        {
            "node": a["node"],
            "ok": a["ok"],
            "error": a["error"],
            "skipped": a.get("skipped", []),
            "files": [
                {k: f.get(k) for k in ("name", "size", "truncated", "source")}
                for f in a["files"]
            ],
        }
        for a in answers
    ]


def evidence_collect(
    *,
    cluster: Cluster,
    trigger: str,
    reason: str = "",
    operation: Operation | None = None,
    incident_id: int | None = None,
    nodes: list[Node] | None = None,
    user: Any = None,
    request: Any = None,
) -> EvidenceBundle:
    """Ask every node (rank order), diagnose across nodes, store one bounded bundle (audited)."""
    members = list(nodes) if nodes is not None else list(cluster.ranked_nodes())
    answers = _ask_all(members)
    now = timezone.now()
    findings = [
        f.to_dict()
        for f in cross_node_findings([a for a in answers if a["ok"]], now.year)
    ]
    root = f"evidence-{cluster.name}-{now.strftime('%Y%m%d-%H%M%S')}"
    archive = _fit(root, answers, findings)
    node_rows = _node_rows(answers)
    first = next((f for f in findings if f.get("first")), None)
    with transaction.atomic():
        bundle = EvidenceBundle.objects.create(
            cluster=cluster,
            operation=operation,
            incident_id=incident_id,
            trigger=trigger,
            reason=reason[:300],
            created_at=now,
            created_by=user if getattr(user, "pk", None) else None,
            nodes=node_rows,
            findings=findings,
            archive=archive,
            size_bytes=len(archive),
        )
        audit_record(
            action="evidence.collect",
            actor=user,
            request=request,
            target=bundle,
            target_repr=str(bundle)[:200],
            after={
                "trigger": trigger,
                "operation": operation.pk if operation else None,
                "incident": incident_id,
                "nodes": {a["node"]: a["ok"] for a in answers},
                "first": f"{first['node']}: {first['id']}" if first else None,
                "bytes": len(archive),
            },
            message="" if all(a["ok"] for a in answers) else "not every node answered",
        )
        evidence_purge(now=now)
    return bundle


def evidence_collect_safe(**kwargs: Any) -> EvidenceBundle | None:
    """evidence_collect for hooks: logs and swallows any error (returns None)."""
    try:
        return evidence_collect(**kwargs)
    except Exception:
        log.exception("evidence collection failed (%s)", kwargs.get("reason", ""))
        return None


def evidence_on_engine_exit(cluster_ids: set[int]) -> None:
    """Ingest hook: engines found exited on these clusters → collect after commit (control queue)."""
    # Late: console.tasks imports this module (the task calls evidence_collect).
    from console.tasks import evidence_collect_task

    for cluster_id in sorted(cluster_ids - {0}):  # 0: a node outside any cluster
        transaction.on_commit(
            functools.partial(
                evidence_collect_task.delay,
                cluster_id,
                None,
                None,
                EvidenceTrigger.ENGINE_EXITED,
            )
        )


def _recent_exit_bundle(op: Operation) -> EvidenceBundle | None:
    """A bundle the engine-exit hook took moments ago, not yet tied to an incident."""
    since = timezone.now() - timedelta(seconds=EXIT_BUNDLE_REUSE_S)
    return (
        EvidenceBundle.objects.defer("archive")
        .filter(
            cluster=op.cluster,
            trigger=EvidenceTrigger.ENGINE_EXITED,
            incident_id=None,
            operation=None,
            created_at__gte=since,
        )
        .first()
    )


def evidence_for_runbook(op: Operation, nodes: list[Node], *, failed: bool) -> None:
    """Runbook hook. ``failed``: the operation just failed (before its rollback). Otherwise
    at the start of a remedy (``params["remedy"]``, set by monitoring's remediation): the
    dead engine's evidence, before any restart. Bundles name their operation; the incident
    finds them through its operations (Incident.operation / operation_ids)."""
    if op.kind not in START_KINDS:
        return
    params = op.params if isinstance(op.params, dict) else {}
    if failed:
        evidence_collect_safe(
            cluster=op.cluster,
            trigger=EvidenceTrigger.OPERATION_FAILED,
            reason=f"operation #{op.pk} ({op.kind}) failed",
            operation=op,
            incident_id=None,
            nodes=nodes,
        )
    elif params.get("remedy") and not params.get("scale_out_of"):
        # (a scale-out starts another cluster: nothing of the failing one to keep there)
        recent = _recent_exit_bundle(op)
        if recent is not None:  # the exit was just collected: tie it to the remedy
            EvidenceBundle.objects.filter(pk=recent.pk).update(operation=op)
            return
        evidence_collect_safe(
            cluster=op.cluster,
            trigger=EvidenceTrigger.REMEDY,
            reason=f"before operation #{op.pk} ({op.kind}), a remedy",
            operation=op,
            incident_id=None,
            nodes=nodes,
        )
