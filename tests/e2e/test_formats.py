"""Browser: one time format and one format per unit, in the user's zone, list = detail.

The server runs on Asia/Shanghai; the browser lives in Europe/Berlin and reads Chinese.
Times must come out 24-hour, to the second, in Berlin time on server-rendered pages and
in the scripts alike; an alert's value carries its unit and reads the same in the list
(live row and rendered row) and on its detail page.
"""

from __future__ import annotations

import zoneinfo
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console.models import Cluster
from console.services.inventory import demo_seed
from console.templatetags.consolefmt import format_value
from monitoring.alerts.services import alert_rules_seed
from monitoring.models.alerts import Alert, AlertRule
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
CASES: list[tuple[float | None, str]] = [
    (86.4, "°C"),
    (92.35, "%"),
    (0.0512, "%"),
    (812.0, "ms"),
    (14950.0, "ms"),
    (0.43, "s"),
    (2.5, "s"),
    (312.0, "W"),
    (3.0, ""),
    (0.5, ""),
    (None, "%"),
    (41.26, "tokens/s"),
]


def test_times_and_values_read_the_same_everywhere() -> None:

    demo_seed()
    alert_rules_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    rule = AlertRule.objects.filter(metric="engine.ttft_p99_ms").first()
    assert rule is not None
    fired = datetime(2026, 12, 4, 14, 40, 5, 123456, tzinfo=UTC)
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        target=cluster.name,
        state="firing",
        severity=rule.severity,
        value=14950.0,
        fault_onset_at=fired - timedelta(seconds=30),
        pending_at=fired - timedelta(seconds=20),
        fired_at=fired,
    )
    make_user("lin", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        context = browser.new_context(locale="zh-CN", timezone_id="Europe/Berlin")
        page = context.new_page()
        browser_login(page, base, "lin")  # the first page tells the server the zone
        page.goto(f"{base}/alerts/")
        assert page.get_attribute("html", "data-tz") == "Europe/Berlin"
        row = f"#alert-{alert.pk}"
        # 15:40:05 in Berlin (14:40:05 UTC), not 22:40:05 Shanghai, no microseconds, 24-hour
        assert (
            page.text_content(f"{row} [data-field=fired_at]") == "2026-12-04 15:40:05"
        )
        listed = (page.text_content(f"{row} [data-field=value]") or "").strip()
        assert listed == "14.95 s"
        # The live path formats the same alert the same way.
        rebuilt = page.evaluate(
            """a => { const f = window.consoleFormat;
                      return [f.value(a.value, JSON.parse(document.getElementById('metric-units').textContent)[a.metric]),
                              f.time(a.fired_at)]; }""",
            {
                "value": 14950.0,
                "metric": "engine.ttft_p99_ms",
                "fired_at": fired.isoformat(),
            },
        )
        assert rebuilt == ["14.95 s", "2026-12-04 15:40:05"]
        page.click(f"{row} a")
        assert (page.text_content("#alert-value") or "").startswith("14.95 s")
        detail = page.inner_text("dl.facts")
        assert "2026-12-04 15:40:05" in detail and "pm" not in detail.lower()

        # format.js and consolefmt.py agree on every unit.
        js: list[Any] = page.evaluate(
            "cases => cases.map(c => window.consoleFormat.value(c[0], c[1]))",
            [list(c) for c in CASES],
        )
        assert js == [format_value(v, u) for v, u in CASES]
        # Chart axes: 24-hour clock in the user's zone, the date once the span passes a day.
        epoch = fired.timestamp()
        ticks = page.evaluate(
            "e => [consoleFormat.axisTime(e, 3600), consoleFormat.axisTime(e, 300), consoleFormat.axisTime(e, 172800)]",
            epoch,
        )
        local = fired.astimezone(BERLIN)
        assert ticks == [
            local.strftime("%H:%M"),
            local.strftime("%H:%M:%S"),
            local.strftime("%m-%d %H:%M"),
        ]
