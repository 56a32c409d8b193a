"""Alerts pages (server-rendered; live rows arrive over /ws/alerts/): list, ack, silence, rules, rule edit."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.permissions import has_role, role_required
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.forms import AlertRuleForm, SilenceForm
from monitoring.alerts.selectors import alert_list
from monitoring.alerts.services import alert_acknowledge, rule_save, silence_create
from monitoring.models_alerts import (
    ACTIVE_STATES,
    ALERT_STATE_COLORS,
    SEVERITY_COLORS,
    Alert,
    AlertRule,
)


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
    return render(
        request,
        "monitoring/alert_rule_form.html",
        {"form": form, "rule": rule},
        status=400 if form.errors else 200,
    )
