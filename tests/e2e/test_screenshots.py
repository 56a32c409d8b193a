"""Browser: a full-page screenshot of every main page in zh-Hans and in English, at
1440 px, kept by CI as artifacts under tests/artifacts/screenshots/<lang>/<page>.png.

Each page must answer 200, render the navigation and show no template error; the
screenshots themselves are for people reviewing the UI.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.utils import timezone

from console.models import Cluster, Node, Operation
from console.models.operations import OperationStep
from console.services.benchmarks import benchmark_set_baseline
from console.services.inventory import demo_seed
from monitoring.alerts.services import alert_rules_seed
from tests.alerts.helpers import ingest
from tests.console.test_benchmarks_page import make_run, make_sweep
from tests.e2e.test_dashboard import (
    ARTIFACTS,
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOTS = ARTIFACTS / "screenshots"


def test_every_main_page_renders_in_both_languages() -> None:

    demo_seed()
    alert_rules_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    now = timezone.now()
    for node in Node.objects.filter(cluster=cluster):
        ingest(node, now - timedelta(seconds=10))
        ingest(node, now)
    op = Operation.objects.create(
        cluster=cluster,
        kind="preflight",
        state="succeeded",
        started_at=now - timedelta(seconds=40),
        finished_at=now,
    )
    OperationStep.objects.create(
        operation=op,
        seq=1,
        name="Checks on ascend-01",
        state="succeeded",
        started_at=now - timedelta(seconds=40),
        finished_at=now,
        data={
            "checks": [
                {
                    "name": "npu-smi health",
                    "status": "pass",
                    "evidence": "8/8 OK",
                    "fix": "",
                }
            ]
        },
    )
    make_user("shot", "admin")
    sweep = make_sweep(cluster)
    benchmark_set_baseline(sweep[2])
    later = make_run(cluster, minutes=30, output_throughput=395.0)
    pages = {
        "overview": "/",
        "cluster": f"/clusters/{cluster.name}/",
        "node": "/nodes/ascend-01/",
        "operation": f"/operations/{op.pk}/",
        "operations": "/operations/",
        "dashboard": f"/monitoring/clusters/{cluster.pk}/",
        "alerts": "/alerts/",
        "alert-rules": "/alerts/rules/",
        "incidents": "/alerts/incidents/",
        "playground": "/playground/",
        "apikeys": "/apikeys/",
        "token": "/accounts/token/",
        "benchmarks": "/benchmarks/",
        "benchmark": f"/benchmarks/{later.pk}/",
        "benchmark-sweep": "/benchmarks/sweep/?sweep=sw-1",
        "benchmark-compare": f"/benchmarks/compare/?a={sweep[2].pk}&b={later.pk}",
    }
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        for lang, locale in (("zh-hans", "zh-CN"), ("en", "en-US")):
            context = browser.new_context(
                locale=locale,
                timezone_id="Asia/Shanghai",
                viewport={"width": 1440, "height": 900},
            )
            page = context.new_page()
            browser_login(page, base, "shot")
            assert page.get_attribute("html", "lang") == lang
            folder = SHOTS / lang
            folder.mkdir(parents=True, exist_ok=True)
            for name, path in pages.items():
                response = page.goto(f"{base}{path}")
                assert response is not None and response.status == 200, (name, path)
                assert page.is_visible("header.topbar nav"), name
                page.wait_for_timeout(300)  # sockets connect, live parts settle
                page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
            context.close()
    assert len(list(SHOTS.glob("*/*.png"))) >= 2 * len(pages)
