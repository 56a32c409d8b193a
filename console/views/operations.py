"""Cluster page (operate), operation page (live steps), operation history."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.gateway.routing import SERVING
from console.models import (
    Cluster,
    LinkMode,
    Node,
    Operation,
    OperationKind,
    OperationState,
)
from console.opschecks import failed_summary
from console.opsmessages import operation_error
from console.opsmessages import render as render_ops
from console.permissions import has_role, role_required
from console.services.audit import client_ip
from console.services.node_actions import (
    ActionRefused,
    cluster_failback,
    cluster_maintenance_set,
    hccs_evidence,
    node_readmit,
)
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_cancel,
    operation_reap_interrupted,
    operation_start,
)
from console.views.controls import operation_controls
from console.views.launchplan import launch_plan
from console.views.progress import check_groups, expected_durations, weighted_progress

# Kinds an operator starts by hand from the cluster page.
MANUAL_KINDS = (
    OperationKind.PREFLIGHT,
    OperationKind.START,
    OperationKind.STOP,
    OperationKind.RESTART,
    OperationKind.VERIFY_WEIGHTS,
)


@role_required("viewer")
def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    operation_reap_interrupted()  # beat's reaper runs on the control worker, which may be the dead one
    cluster = get_object_or_404(Cluster.objects.select_related("profile"), name=name)
    active = cluster.operations.filter(finished_at__isnull=True).first()
    return render(
        request,
        "console/cluster.html",
        {
            "cluster": cluster,
            "nodes": cluster.ranked_nodes(),
            "active": active,
            "recent": cluster.operations.all()[:10],
            "kinds": MANUAL_KINDS,
            "controls": operation_controls(cluster, active),
            "plan": launch_plan(cluster, admin=has_role(request.user, "admin")),
            "on_roce": [
                hccs_evidence(n)
                for n in cluster.nodes.filter(link_mode=LinkMode.ROCE).order_by("rank")
            ],
            "pool": serving_pool(cluster),
        },
    )


def serving_pool(cluster: Cluster) -> dict[str, object] | None:
    """The clusters serving this cluster's model name, for the pool card (None when alone).

    The gateway balances a model's requests over the members that are serving; scale-out
    starts a stopped one, scale-in (manual, never automatic) stops one of them.
    """
    model = cluster.profile.served_model_name
    members = list(
        Cluster.objects.filter(profile__served_model_name=model).order_by("name")
    )
    if len(members) < 2:
        return None
    serving = [c for c in members if c.state in SERVING]
    return {
        "model": model,
        "members": [
            {
                "cluster": c,
                "serving": c.state in SERVING,
                "keeps": ", ".join(o.name for o in serving if o.pk != c.pk),
            }
            for c in members
        ],
        "can_scale_in": len(serving) > 1,
    }


@require_POST
@role_required("operator")
def operation_create(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    kind = request.POST.get("kind", "")
    if kind not in MANUAL_KINDS:
        messages.error(
            request,
            _(
                "Unknown operation {kind!r}; use preflight, start, stop or restart."
            ).format(kind=kind),
        )
        return redirect("cluster-detail", name=name)
    force = request.POST.get("force") == "1"
    try:
        op = operation_start(
            cluster=cluster,
            kind=kind,
            user=request.user,
            reason=request.POST.get("reason", "").strip(),
            source="ui",
            force=force,
            request=request,
            source_ip=client_ip(request),
        )
    except (OperationConflict, OperationRefused) as exc:
        messages.error(request, str(exc))
        return redirect("cluster-detail", name=name)
    return HttpResponseRedirect(reverse("operation-detail", args=[op.pk]))


@role_required("viewer")
def operation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    operation_reap_interrupted()
    op = get_object_or_404(
        Operation.objects.select_related("cluster", "cluster__profile"), pk=pk
    )
    steps = list(op.steps.select_related("node"))
    done, total = op.progress()
    preflight = (op.result or {}).get("preflight")
    for step in steps:
        checks = list((step.data or {}).get("checks") or [])
        step.checks_split = check_groups(checks)  # type: ignore[attr-defined]
        # a failed preflight step names its failing checks: in the reader's language
        step.summary_text = (  # type: ignore[attr-defined]
            failed_summary(checks) if step.state == "failed" and checks else None
        ) or render_ops((step.data or {}).get("summary_msg") or step.summary)
    expected = expected_durations(op)
    fraction, eta_s = weighted_progress(steps, expected)
    if not op.is_active:
        fraction, eta_s = (1.0 if op.state == "succeeded" else fraction), None
    return render(
        request,
        "console/operation.html",
        {
            "op": op,
            "steps": steps,
            "done": done,
            "total": total,
            "percent": round(fraction * 100),
            "eta_s": eta_s,
            "expected": expected,
            "step_states": {
                s.seq: {
                    "name": s.name,
                    "state": s.state,
                    "started_at": s.started_at.isoformat() if s.started_at else None,
                }
                for s in steps
            },
            # The node tables repeat what each step already shows; keep them only when no step does.
            "preflight": None
            if any((s.data or {}).get("checks") for s in steps)
            else preflight,
            "can_cancel": op.is_active and has_role(request.user, "operator"),
            "error_text": operation_error(op.error, steps) if op.error else "",
        },
    )


@require_POST
@role_required("operator")
def operation_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    op = get_object_or_404(Operation, pk=pk)
    if op.is_active:
        operation_cancel(operation=op, user=request.user, request=request)
        messages.info(
            request,
            _(
                "Cancellation requested; the operation rolls back after its current step."
            ),
        )
    return redirect("operation-detail", pk=pk)


@role_required("viewer")
def operation_list(request: HttpRequest) -> HttpResponse:
    ops = Operation.objects.select_related("cluster").order_by("-created_at")
    filters = {k: request.GET.get(k, "") for k in ("cluster", "kind", "state")}
    if filters["cluster"]:
        ops = ops.filter(cluster__name=filters["cluster"])
    if filters["kind"]:
        ops = ops.filter(kind=filters["kind"])
    if filters["state"]:
        ops = ops.filter(state=filters["state"])
    page = Paginator(ops, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "console/operations.html",
        {
            "page": page,
            "filters": filters,
            "clusters": Cluster.objects.values_list("name", flat=True),
            "kinds": OperationKind.choices,
            "states": OperationState.choices,
        },
    )


@require_POST
@role_required("operator")
def cluster_maintenance(request: HttpRequest, name: str) -> HttpResponse:
    """The maintenance-mode switch: on pauses every automatic remediation of the cluster."""
    cluster = get_object_or_404(Cluster, name=name)
    value = request.POST.get("maintenance_mode", "")
    if value not in ("on", "off"):
        messages.error(request, _("maintenance_mode must be on or off."))
        return redirect("cluster-detail", name=name)
    cluster_maintenance_set(
        cluster=cluster,
        on=value == "on",
        user=request.user,
        reason=request.POST.get("reason", "").strip(),
        request=request,
    )
    if value == "on":
        messages.warning(
            request,
            _(
                "Maintenance mode is on: automatic remediation is paused for {cluster}."
            ).format(cluster=name),
        )
    else:
        messages.success(
            request,
            _("Maintenance mode is off: automatic remediation is active again."),
        )
    return redirect("cluster-detail", name=name)


@require_POST
@role_required("operator")
def cluster_failback_view(request: HttpRequest, name: str) -> HttpResponse:
    """Fail the nodes on RoCE back to HCCS: a manual failover operation (never automatic)."""
    cluster = get_object_or_404(Cluster, name=name)
    try:
        op = cluster_failback(
            cluster=cluster,
            user=request.user,
            reason=request.POST.get("reason", "").strip(),
            request=request,
            source="ui",
        )
    except (ActionRefused, OperationConflict, OperationRefused) as exc:
        messages.error(request, str(exc))
        return redirect("cluster-detail", name=name)
    return HttpResponseRedirect(reverse("operation-detail", args=[op.pk]))


@require_POST
@role_required("operator")
def node_readmit_view(request: HttpRequest, name: str) -> HttpResponse:
    """Preflight an out-of-service node; when every check passes it is an idle spare again."""
    node = get_object_or_404(Node, name=name)
    try:
        result = node_readmit(
            node=node,
            user=request.user,
            request=request,
            accept_unverified_links=request.POST.get("accept_unverified_links", "")[
                :300
            ],
        )
    except ActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            _("{node} passed {n} preflight checks and is an idle spare again.").format(
                node=name, n=len(result["checks"])
            ),
        )
    return redirect("overview")
