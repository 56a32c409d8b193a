"""One way to show times and measured values, on the server; ``static/console/js/format.js``
is its twin in the browser and applies the same rules (tests/e2e/test_formats.py holds
both to the same cases).

Times: ``YYYY-MM-DD HH:MM:SS``, 24-hour in every language, in the user's time zone (the
one the request activated, see ``console.timezones``), never finer than seconds.
Values: one format per unit (°C whole degrees, % one decimal (two under 10 %), latencies in ms below a
second and in s above it, counts as integers).
"""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from console.opschecks import render_check
from console.opsmessages import ENGINE_STATES, catalog_for_js, render, word

register = template.Library()

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def format_time(value: datetime | str | None) -> str:
    """A datetime (or ISO 8601 text) as local ``YYYY-MM-DD HH:MM:SS``; "—" for none."""
    if value in (None, ""):
        return "—"
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            return value
        value = parsed
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return value.strftime(TIME_FORMAT)


def format_value(value: float | int | str | None, unit: str = "") -> str:
    """A measured value with its unit, the same way everywhere; "—" for none."""
    if value is None or value == "":
        return "—"
    v = float(value)
    if unit == "°C":
        return f"{v:.0f} °C"
    if unit == "%":  # small percentages (link loss) keep two decimals
        return f"{v:.2f} %" if abs(v) < 10 else f"{v:.1f} %"
    if unit == "ms":
        return f"{v:.0f} ms" if abs(v) < 1000 else f"{v / 1000:.2f} s"
    if unit == "s":
        return f"{v * 1000:.0f} ms" if abs(v) < 1 else f"{v:.2f} s"
    if unit == "W":
        return f"{v:.0f} W"
    if not unit:
        return f"{v:.0f}" if v.is_integer() else f"{v:.2f}"
    return f"{v:.1f} {unit}"


def format_duration(seconds: float | None) -> str:
    """``42 s``, ``1 min 13 s``, ``2 h 05 min``; "—" for none."""
    if seconds is None:
        return "—"
    total = max(0, int(float(seconds) + 0.5))  # half up, as Math.round in format.js
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{total // 60} min {total % 60} s"
    return f"{total // 3600} h {total % 3600 // 60:02d} min"


@register.filter
def duration(value: float | None) -> str:
    """``{{ op.duration_s|duration }}`` → ``1 min 13 s``."""
    return format_duration(value)


@register.filter
def when(value: datetime | str | None) -> str:
    """``{{ alert.fired_at|when }}`` → ``2026-12-04 22:40:05`` in the user's zone."""
    return format_time(value)


@register.filter
def unit(value: float | int | None, unit_name: str) -> str:
    """``{{ t|unit:"°C" }}`` → ``86 °C``."""
    return format_value(value, unit_name)


@register.filter
def ops(value: object) -> str:
    """Operational content (step names, …) in the reader's language: ``{{ step.name|ops }}``."""

    return render(value)


@register.filter
def check_text(value: dict[str, object]) -> dict[str, str]:
    """A preflight check's name, evidence and fix in the reader's language:
    ``{% with t=c|check_text %}{{ t.name }}…``."""

    return render_check(value)


@register.filter
def engine_state(value: str | None) -> str:
    """``running`` → ``运行中`` for a zh-Hans reader."""

    return word(ENGINE_STATES, value) or "—"


@register.simple_tag
def ops_catalog_json() -> str:
    """The operational-content catalogue for format.js, as a JSON <script> element."""
    from django.utils.html import json_script

    return json_script(catalog_for_js(), "ops-catalog")
