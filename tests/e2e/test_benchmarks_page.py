"""Browser: a viewer opens the Benchmarks page, expands a sweep, opens its charts and sees
every uPlot chart drawn (a canvas with the sweep's points); then compares two ticked runs.

Real parts: runs stored through the import service in vLLM's --save-result shape, uvicorn
serving the ASGI app, Debian's chromium. The screenshot is kept as an artifact.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from console.models import Cluster
from console.services.inventory import demo_seed
from tests.console.test_benchmarks_page import make_sweep
from tests.e2e.test_dashboard import (
    ARTIFACTS,
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHARTS = ("ttft", "tpot", "itl", "throughput", "tradeoff")


def test_a_sweep_opens_and_its_charts_are_drawn() -> None:
    demo_seed()
    points = make_sweep(Cluster.objects.get(name="qwen35-prod"))
    make_user("bea", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(
            locale="en-US", viewport={"width": 1440, "height": 1000}
        )
        page.set_extra_http_headers({"Accept-Language": "en"})
        browser_login(page, base, "bea")
        page.click("#nav-benchmarks")
        page.wait_for_selector(".sweep-row")
        first = f"#bench-run-{points[1].pk}"  # concurrency 1
        assert page.is_hidden(first)
        page.click(".sweep-toggle")
        assert page.is_visible(first) and page.is_visible(f"#bench-run-{points[0].pk}")
        page.click(".sweep-link")
        page.wait_for_url(f"{base}/benchmarks/sweep/?sweep=sw-1")
        for chart in CHARTS:
            page.wait_for_selector(f"#chart-{chart} canvas", timeout=15_000)
            assert page.get_attribute(f"#chart-{chart}", "data-points") == "3"
            assert "is-empty" not in (
                page.get_attribute(f"#chart-{chart}", "class") or ""
            )
        # the canvas has ink: some pixel differs from the first (uPlot drew series on it)
        drawn = page.evaluate(
            """() => [...document.querySelectorAll('#bench-charts canvas')].map(c => {
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                for (let i = 4; i < d.length; i += 4) {
                  if (d[i] !== d[0] || d[i+1] !== d[1] || d[i+2] !== d[2] || d[i+3] !== d[3]) return true;
                }
                return false;
              })"""
        )
        assert drawn == [True] * len(CHARTS)
        legend = page.locator("#chart-ttft .u-legend").inner_text()
        assert "p50" in legend and "p99" in legend
        assert "1.50 s" in legend  # concurrency 32's p99 TTFT, shown without hovering
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "benchmarks-sweep.png"), full_page=True)
        # tick two points on the sweep page and compare them: the older is the base
        page.check(f"#bench-run-{points[1].pk} input[type=checkbox]")
        page.check(f"#bench-run-{points[2].pk} input[type=checkbox]")
        page.click("#pick-form button")
        page.wait_for_selector("#bench-compare")
        assert page.get_attribute("#bench-compare", "data-a") == str(points[1].pk)
        assert "output_throughput" in page.locator("#compare-figures").inner_text()
    assert (ARTIFACTS / "benchmarks-sweep.png").stat().st_size > 10_000
