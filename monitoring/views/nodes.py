"""One node's page: hardware, versions, links per chip, engine process, its part of the
launch plan, recent samples, its alerts and incidents (live over its cluster's socket)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from console.models import Node
from console.permissions import has_role, role_required
from console.selectors import node_link_fault_plan, node_release_status
from console.views.launchplan import launch_plan
from monitoring.models import Alert, ChipSample, Incident, NodeLatest, NodeSample

RECENT_SAMPLES = 20


def _chips(
    data: dict[str, Any], losses: dict[str, float | None]
) -> list[dict[str, Any]]:
    """Latest chip figures joined with HCCS health and link count and the chip's loss."""
    hccs = data.get("hccs") or {}
    out = []
    for c in data.get("chips") or []:
        key = f"{c['npu']}.{c['chip']}"
        h = hccs.get(key) or {}
        hbm = (
            100.0 * c["hbm_used_mb"] / c["hbm_total_mb"]
            if c.get("hbm_used_mb") is not None and c.get("hbm_total_mb")
            else None
        )
        out.append(
            {
                **c,
                "key": key,
                "hbm_pct": hbm,
                "hccs_health": h.get("health"),
                "hccs_links": len(h.get("links") or []),
                "hccs_loss_pct": losses.get(key),
            }
        )
    return out


@require_GET
@role_required("viewer")
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(
        Node.objects.select_related("cluster", "cluster__profile"), name=name
    )
    latest = NodeLatest.objects.filter(node=node).first()
    data = latest.data if latest is not None else {}
    losses: dict[str, float | None] = {}
    if latest is not None:
        for npu, chip, loss in ChipSample.objects.filter(
            node=node, ts=latest.ts
        ).values_list("npu", "chip", "hccs_loss_pct"):
            losses[f"{npu}.{chip}"] = loss
    plan_node = None
    if node.cluster is not None:
        plan = launch_plan(node.cluster, admin=has_role(request.user, "admin"))
        plan_node = next((n for n in plan["nodes"] if n["name"] == node.name), None)
    return render(
        request,
        "monitoring/node_detail.html",
        {
            "node": node,
            "latest": latest,
            "chips": _chips(data, losses),
            "roce": data.get("roce") or [],
            "host": data.get("host") or {},
            "engine": data.get("engine") or {},
            "hccs_loss_pct": data.get("hccs_loss_pct"),
            # measured / no_traffic / unsupported / no_baseline / reset (engine/link_loss.py)
            "hccs_loss_state": data.get("hccs_loss_state"),
            # what the console does about an HCCS fault here, per server model
            "link_plan": node_link_fault_plan(node),
            "release": node_release_status(node),
            "plan_node": plan_node,
            "samples": NodeSample.objects.filter(node=node).order_by("-ts")[
                :RECENT_SAMPLES
            ],
            "alerts": Alert.objects.filter(node=node)
            .select_related("rule")
            .order_by("-pending_at")[:20],
            "incidents": Incident.objects.filter(node=node)
            .select_related("alert__rule")
            .order_by("-pk")[:20],
        },
    )
