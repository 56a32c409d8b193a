"""``{% firing_critical_count %}``: the banner's one query per page."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from console.templatetags.consolefmt import format_value
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.selectors import firing_critical_count as _count

register = template.Library()


@register.simple_tag
def firing_critical_count() -> int:
    return _count()


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
