"""``{% firing_critical_count %}``: the banner's one query per page."""

from __future__ import annotations

from django import template

from monitoring.alerts.selectors import firing_critical_count as _count

register = template.Library()


@register.simple_tag
def firing_critical_count() -> int:
    return _count()
