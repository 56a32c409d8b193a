"""Browser: node names lead to a node page; the cluster page shows live NPU figures and
the launch plan; the rules page is in the navigation."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from django.utils import timezone

from console.live import publish
from console.models import Cluster, Node
from console.services.inventory import demo_seed
from tests.alerts.helpers import ingest
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    off_thread,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_cluster_page_and_the_node_page_show_what_the_node_is_doing() -> None:

    demo_seed()
    cluster = Cluster.objects.get(name="qwen35-prod")
    node = Node.objects.get(name="ascend-02")
    ingest(node, timezone.now(), temp=77.0)
    make_user("vic", "viewer")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US", viewport={"width": 1440, "height": 900})
        browser_login(page, base, "vic")
        assert page.is_visible("#nav-rules")
        page.goto(f"{base}/clusters/{cluster.name}/")
        page.wait_for_selector("[data-conn-for].live", timeout=30_000)

        # Max NPU temperature / HBM follow the telemetry pushes (they stayed "—" before).
        assert page.text_content("#node-temp-ascend-02") == "—"
        chips = [[i, 0, 60.0 + i, 80.0 + i / 2, 10.0, "OK"] for i in range(8)]
        off_thread(
            lambda: publish(
                f"cluster-{cluster.pk}",
                "telemetry.update",
                {
                    "ts": timezone.now().timestamp(),
                    "nodes": {
                        "ascend-02": {
                            "state": "running",
                            "color": "green",
                            "last_seen": timezone.now().timestamp(),
                            "chips": chips,
                        }
                    },
                },
            )
        )
        page.wait_for_function(
            "document.getElementById('node-temp-ascend-02').textContent === '67 °C'",
            timeout=20_000,
        )
        assert page.text_content("#node-hbm-ascend-02") == "83.5 %"

        # The launch plan, per node in rank order: argv, environment, unit.
        plan = page.locator("#launch-plan details.plan-node")
        assert plan.count() == 4
        page.click("#plan-ascend-02 summary")
        argv = page.text_content("#plan-ascend-02 .plan-argv") or ""
        assert argv.startswith("vllm") and "--data-parallel-start-rank" in argv
        assert "HCCL_IF_IP" in (page.text_content("#plan-ascend-02 .plan-env") or "")
        assert "[Service]" in (page.text_content("#plan-ascend-02 .plan-unit") or "")

        # The node's name leads to its page.
        page.click("#node-ascend-02 a.node-link")
        page.wait_for_url(f"{base}/nodes/ascend-02/")
        facts = page.inner_text("#node-facts")
        assert "Atlas 800T A2" in facts and "vLLM" in facts
        assert page.locator("#chip-table tbody tr").count() == 8
        assert "77 °C" in (page.text_content("#chip-3\\.0") or "")
        assert page.is_visible("#node-plan .plan-argv")
        assert page.locator("#node-samples tbody tr").count() >= 1
