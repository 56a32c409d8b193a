"""Reads for incidents: list, one incident's timeline, detection / MTTR distribution."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from console.models import Operation
from console.opsmessages import DECISIONS, word
from monitoring.models import AlertEventKind, Incident

# Buckets of the distribution chart, seconds (upper bounds; the last is open).
BUCKETS_S = (5, 10, 30, 60, 180, 600, 1800)
# The original field guide: about 3 minutes to find the node by hand at 3 a.m.
MANUAL_DIAGNOSIS_S = 180


def incident_list(
    *, cluster: str = "", state: str = "", action: str = ""
) -> QuerySet[Incident]:
    qs = Incident.objects.select_related(
        "alert__rule", "cluster", "node", "approved_by"
    )
    if cluster:
        qs = qs.filter(cluster__name=cluster)
    if state:
        qs = qs.filter(state=state)
    if action:
        qs = qs.filter(action=action)
    return qs.order_by("-detected_at", "-pk")


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def incident_to_dict(incident: Incident) -> dict[str, Any]:
    """The API's and the pages' JSON shape of one incident."""
    alert = incident.alert
    return {
        "id": incident.pk,
        "alert": alert.pk,
        "rule": alert.rule.name,
        "target": alert.target,
        "cluster": incident.cluster.name if incident.cluster else None,
        "node": incident.node.name if incident.node else None,
        "action": incident.action,
        "policy": incident.policy,
        "state": incident.state,
        "summary": incident.summary,
        "attempts": incident.attempts,
        "operations": list(incident.operation_ids or []),
        "verification": incident.verification or {},
        "fault_onset_at": _ts(incident.fault_onset_at),
        "detected_at": _ts(incident.detected_at),
        "decided_at": _ts(incident.decided_at),
        "operation_started_at": _ts(incident.operation_started_at),
        "healthy_at": _ts(incident.healthy_at),
        "resolved_at": _ts(incident.resolved_at),
        "approved_by": incident.approved_by.username if incident.approved_by else None,
        "approved_at": _ts(incident.approved_at),
        "detection_s": incident.detection_s,
        "decision_s": incident.decision_s,
        "mttr_s": incident.mttr_s,
    }


def incident_timeline(incident: Incident) -> list[dict[str, Any]]:
    """Milestones and every remediation decision, oldest first."""
    milestones = [
        ("fault_onset", _("Fault onset (first bad sample)"), incident.fault_onset_at),
        ("detected", _("Detected (alert firing)"), incident.detected_at),
        ("decided", _("Decision"), incident.decided_at),
        ("approved", _("Approved"), incident.approved_at),
        ("operation_started", _("Operation started"), incident.operation_started_at),
        ("healthy", _("Engine healthy again"), incident.healthy_at),
        ("resolved", _("Alert resolved"), incident.resolved_at),
    ]
    rows: list[dict[str, Any]] = [
        {
            "kind": kind,
            "label": str(label),
            "at": at,
            "message": "",
            "actor": None,
            "statement": "",
        }
        for kind, label, at in milestones
        if at is not None
    ]
    for event in incident.alert.events.filter(
        kind=AlertEventKind.REMEDIATION, data__incident=incident.pk
    ).select_related("actor"):
        rows.append(
            {
                "kind": f"decision:{(event.data or {}).get('decision', '')}",
                "label": str(
                    _("Decision: {decision}").format(
                        decision=word(DECISIONS, (event.data or {}).get("decision", ""))
                    )
                ),
                "at": event.at,
                "message": event.message,
                "actor": event.actor.username if event.actor else None,
                # a link-fault remedy choice: every remedy, whether it can work here,
                # its expected downtime and sources (engine.capabilities.remedy_statement)
                "statement": str((event.data or {}).get("statement") or ""),
            }
        )
    rows.sort(key=lambda r: (r["at"], not r["kind"].startswith("decision")))
    return rows


def incident_operations(incident: Incident) -> list[Operation]:
    ids = list(incident.operation_ids or [])
    ops = {
        op.pk: op
        for op in Operation.objects.select_related("cluster").filter(pk__in=ids)
    }
    return [ops[i] for i in ids if i in ops]


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of a non-empty list, else None."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def incident_stats(incidents: QuerySet[Incident] | list[Incident]) -> dict[str, Any]:
    """p50 / p95 and a histogram of detection, decision and recovery times."""
    rows = list(incidents)
    series = {
        "detection": [i.detection_s for i in rows],
        "decision": [d for i in rows if (d := i.decision_s) is not None],
        "mttr": [m for i in rows if (m := i.mttr_s) is not None],
    }
    out: dict[str, Any] = {
        "count": len(rows),
        "buckets_s": list(BUCKETS_S),
        "manual_reference_s": MANUAL_DIAGNOSIS_S,
    }
    for name, values in series.items():
        counts = [0] * (len(BUCKETS_S) + 1)
        for v in values:
            counts[
                next((k for k, b in enumerate(BUCKETS_S) if v <= b), len(BUCKETS_S))
            ] += 1
        out[name] = {
            "n": len(values),
            "p50": _percentile(values, 50),
            "p95": _percentile(values, 95),
            "histogram": counts,
        }
    return out
