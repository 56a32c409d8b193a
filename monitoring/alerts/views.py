"""Alerts pages (server-rendered; live rows arrive over /ws/alerts/): list, ack, silence, rules, rule edit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.permissions import has_role, role_required
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.forms import AlertRuleForm, SilenceForm
from monitoring.alerts.incidents import (
    incident_list,
    incident_operations,
    incident_stats,
    incident_timeline,
)
from monitoring.alerts.rules import COMPARE
from monitoring.alerts.selectors import alert_list, observations_collect
from monitoring.alerts.services import alert_acknowledge, rule_save, silence_create
from monitoring.models import (
    ACTIVE_STATES,
    ALERT_STATE_COLORS,
    SEVERITY_COLORS,
    Alert,
    AlertRule,
    Incident,
    IncidentState,
    RemediationAction,
)
from monitoring.remediation import RemediationRefused, incident_approve, incident_reject


@require_GET
@role_required("viewer")
def alerts_page(request: HttpRequest) -> HttpResponse:
    """Active alerts and the last 100 resolved, with ack/silence buttons for operators."""
    qs = alert_list()
    return render(
        request,
        "monitoring/alerts.html",
        {
            "active": list(qs.filter(state__in=ACTIVE_STATES)[:500]),
            "resolved": list(qs.filter(state="resolved")[:100]),
            "can_ack": has_role(request.user, "operator"),
            "silence_form": SilenceForm(),
            "state_colors": ALERT_STATE_COLORS,
            "severity_colors": SEVERITY_COLORS,
        },
    )


@require_GET
@role_required("viewer")
def alert_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One alert with its full timeline."""
    alert = get_object_or_404(
        Alert.objects.select_related("rule", "cluster", "acknowledged_by"), pk=pk
    )
    return render(
        request,
        "monitoring/alert_detail.html",
        {"alert": alert, "events": alert.events.select_related("actor")},
    )


@require_POST
@role_required("operator")
def alert_ack(request: HttpRequest, pk: int) -> HttpResponse:
    alert = get_object_or_404(Alert.objects.select_related("rule"), pk=pk)
    try:
        alert_acknowledge(alert=alert, user=request.user, request=request)
        messages.success(request, _("Alert acknowledged."))
    except ValueError:
        messages.error(request, _("Only a firing alert can be acknowledged."))
    return redirect("alerts")


@require_POST
@role_required("operator")
def alert_silence(request: HttpRequest, pk: int) -> HttpResponse:
    """Silence this alert's rule + target for the chosen time."""
    alert = get_object_or_404(Alert.objects.select_related("rule"), pk=pk)
    form = SilenceForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose how long to silence for."))
        return redirect("alerts")
    silence_create(
        user=request.user,
        ends_at=timezone.now() + timedelta(hours=form.cleaned_data["hours"]),
        rule=alert.rule,
        target=alert.target,
        comment=form.cleaned_data["comment"],
        request=request,
    )
    messages.success(request, _("Alert silenced."))
    return redirect("alerts")


@require_GET
@role_required("viewer")
def rules_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "monitoring/alert_rules.html",
        {
            "rules": AlertRule.objects.select_related("cluster"),
            "metrics": METRICS,
            "can_edit": has_role(request.user, "admin"),
        },
    )


PREVIEW_ROWS = 50


def rule_preview_rows(
    *, metric: str, comparison: str, threshold: float, cluster_id: int | None
) -> dict[str, Any]:
    """What a rule with these settings would see now: every current target of the metric
    with its value and whether it is over the threshold (before the tolerance period)."""
    compare = COMPARE.get(comparison)
    obs = observations_collect(now=timezone.now()).get(metric, [])
    if cluster_id is not None:
        obs = [o for o in obs if o.cluster_id == cluster_id]
    rows = [
        {
            "target": o.target,
            "value": o.value,
            "matches": bool(compare and compare(o.value, threshold)),
        }
        for o in sorted(obs, key=lambda o: o.target)
    ]
    rows.sort(key=lambda r: not r["matches"])  # what would fire first
    return {
        "rows": rows[:PREVIEW_ROWS],
        "matching": sum(r["matches"] for r in rows),
        "total": len(rows),
        "metric": metric,
    }


@require_GET
@role_required("admin")
def rule_preview(request: HttpRequest) -> HttpResponse:
    """The rule editor's live preview (an HTML fragment): ?metric=&comparison=&threshold=&cluster=."""
    metric = request.GET.get("metric", "")
    comparison = request.GET.get("comparison", "")
    errors = {}
    if metric not in METRICS:
        errors["metric"] = _("Choose a metric from the list.")
    if comparison not in COMPARE:
        errors["comparison"] = _("Choose a comparison from the list.")
    try:
        threshold = float(request.GET.get("threshold", ""))
    except ValueError:
        errors["threshold"] = _("Enter a number, e.g. 85.")
        threshold = 0.0
    cluster_id: int | None = None
    if request.GET.get("cluster"):
        try:
            cluster_id = int(request.GET["cluster"])
        except ValueError:
            errors["cluster"] = _("Choose a cluster from the list.")
    if errors:
        return render(
            request,
            "monitoring/partials/_rule_preview.html",
            {"errors": errors},
            status=400,
        )
    return render(
        request,
        "monitoring/partials/_rule_preview.html",
        {
            "preview": rule_preview_rows(
                metric=metric,
                comparison=comparison,
                threshold=threshold,
                cluster_id=cluster_id,
            )
        },
    )


@require_http_methods(["GET", "POST"])
@role_required("admin")
def rule_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Create or edit a rule; bad input re-renders the form with field errors (nothing saved)."""
    rule = get_object_or_404(AlertRule, pk=pk) if pk is not None else None
    form = AlertRuleForm(request.POST or None, instance=rule)
    if request.method == "POST" and form.is_valid():
        data = {k: v for k, v in form.cleaned_data.items()}
        # rule_save works on a fresh copy so a failed form never leaves the instance half-changed.
        saved = rule_save(
            rule=AlertRule.objects.get(pk=pk) if pk else None,
            data=data,
            user=request.user,
            request=request,
        )
        messages.success(request, _("Rule “{name}” saved.").format(name=saved.name))
        return redirect("alert-rules")
    preview = None
    if rule is not None and not form.errors:
        preview = rule_preview_rows(
            metric=rule.metric,
            comparison=rule.comparison,
            threshold=rule.threshold,
            cluster_id=rule.cluster_id,
        )
    return render(
        request,
        "monitoring/alert_rule_form.html",
        {"form": form, "rule": rule, "preview": preview},
        status=400 if form.errors else 200,
    )


# -- incidents ------------------------------------------------------------------------


@require_GET
@role_required("viewer")
def incidents_page(request: HttpRequest) -> HttpResponse:
    """Every incident (newest 200) with detection / decision / MTTR p50 / p95 and their distribution."""
    filters = {k: request.GET.get(k, "") for k in ("cluster", "state", "action")}
    if filters["state"] not in ("", *IncidentState.values):
        filters["state"] = ""
    if filters["action"] not in ("", *RemediationAction.values):
        filters["action"] = ""
    qs = incident_list(**filters)
    acted = qs.exclude(state__in=(IncidentState.SKIPPED, IncidentState.REJECTED))
    stats = incident_stats(acted[:1000])
    return render(
        request,
        "monitoring/incidents.html",
        {
            "incidents": list(qs[:200]),
            "stats": stats,
            "filters": filters,
            "states": IncidentState.choices,
            "actions": RemediationAction.choices,
            "vendor_ok": finders.find("vendor/uplot/uPlot.iife.min.js") is not None,
        },
    )


@require_GET
@role_required("viewer")
def incident_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One incident: milestones, every decision, the operations it ran, approve / reject for operators."""
    incident = get_object_or_404(
        Incident.objects.select_related(
            "alert__rule", "cluster", "node", "approved_by"
        ),
        pk=pk,
    )
    return render(
        request,
        "monitoring/incident_detail.html",
        {
            "incident": incident,
            "timeline": incident_timeline(incident),
            "operations": incident_operations(incident),
            "can_decide": incident.state == IncidentState.AWAITING_APPROVAL
            and has_role(request.user, "operator"),
        },
    )


@require_POST
@role_required("operator")
def incident_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """The approve / reject buttons of an incident awaiting approval."""
    incident = get_object_or_404(Incident, pk=pk)
    decision = request.POST.get("decision", "")
    try:
        if decision == "approve":
            op = incident_approve(incident=incident, user=request.user)
            if op is not None:
                messages.success(
                    request, _("Approved: operation #{id} started.").format(id=op.pk)
                )
                return redirect("operation-detail", pk=op.pk)
            messages.warning(
                request,
                _("Approved, but a precondition failed: the incident was escalated."),
            )
        elif decision == "reject":
            incident_reject(incident=incident, user=request.user)
            messages.info(
                request, _("Rejected: nothing will be done; the alert stays.")
            )
        else:
            messages.error(
                request,
                _("Unknown decision {decision!r}; use approve or reject.").format(
                    decision=decision
                ),
            )
    except RemediationRefused as exc:
        messages.error(request, str(exc))
    return redirect("incident-detail", pk=pk)
