"""Alert counts for the banner and the navigation (one query per page), alert values with units."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from console.templatetags.consolefmt import format_value
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.selectors import firing_counts as _counts

register = template.Library()


@register.simple_tag(takes_context=True)
def firing_counts(context: Any) -> dict[str, int]:
    """``{% firing_counts as n %}`` → ``n.critical``, ``n.warning``, ``n.total``; counted
    once per request however many parts of the page ask."""
    request = context.get("request")
    cached = getattr(request, "_firing_counts", None)
    if cached is None:
        counts = _counts()
        cached = {**counts, "total": counts["critical"] + counts["warning"]}
        if request is not None:
            request._firing_counts = cached
    return cached


@register.filter
def metric_value(value: float | int | None, metric: str) -> str:
    """An alert's value in its metric's unit: ``{{ a.value|metric_value:a.rule.metric }}``."""
    m = METRICS.get(metric)
    return format_value(value, m.unit if m else "")


@register.simple_tag
def metric_units_json() -> SafeString:
    """``<script type="application/json">`` body: metric key → unit, for alerts.js."""
    from django.utils.html import json_script

    return json_script({k: m.unit for k, m in METRICS.items()}, "metric-units")
