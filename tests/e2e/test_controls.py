"""Browser: controls fit the state.

The cluster page offers only the operations the cluster's state allows, says why the
others are off on hover, and follows a state change live; Stop is not a solid red
primary; revoking a gateway key asks first.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest

from console.gateway.services import apikey_create
from console.models import Cluster, ClusterState
from console.models.gateway import ApiKey
from console.services.inventory import demo_seed
from console.services.operations import cluster_set_state
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    off_thread,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def revoked(pk: int) -> bool:
    out: list[bool] = []
    off_thread(lambda: out.append(ApiKey.objects.get(pk=pk).revoked_at is not None))
    return out[0]


def button(page: Any, kind: str) -> str:
    return f"#op-buttons button[value={kind}]"


def test_the_cluster_page_offers_what_the_state_allows_and_says_why_not() -> None:

    demo_seed()
    Cluster.objects.filter(name="qwen35-prod").update(state=ClusterState.RUNNING)
    cluster = Cluster.objects.get(name="qwen35-prod")
    make_user("olga", "operator")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "olga")
        page.goto(f"{base}/clusters/{cluster.name}/")
        page.wait_for_selector("[data-conn-for].live", timeout=30_000)

        # Running: Start and Preflight are off, with the reason on hover; Stop/Restart on.
        assert page.is_disabled(button(page, "start"))
        assert "Restart" in (page.get_attribute(button(page, "start"), "title") or "")
        assert page.is_disabled(button(page, "preflight"))
        assert "own engines" in (
            page.get_attribute(button(page, "preflight"), "title") or ""
        )
        assert page.is_enabled(button(page, "stop"))
        assert page.is_enabled(button(page, "restart"))
        # Stop is outlined, not a solid red block beside Start.
        bg = page.eval_on_selector(
            button(page, "stop"), "b => getComputedStyle(b).backgroundColor"
        )
        assert bg == "rgb(255, 255, 255)"
        # A disabled button looks disabled.
        opacity = page.eval_on_selector(
            button(page, "start"), "b => getComputedStyle(b).opacity"
        )
        assert float(opacity) < 0.6

        # The cluster stops (an operation elsewhere): the buttons follow, no reload.
        off_thread(lambda: cluster_set_state(cluster, ClusterState.STOPPED))
        page.wait_for_selector(
            f"{button(page, 'start')}:not([disabled])", timeout=20_000
        )
        assert page.is_disabled(button(page, "stop"))
        assert page.is_disabled(button(page, "restart"))
        assert "use Start" in (page.get_attribute(button(page, "stop"), "title") or "")
        assert page.is_enabled(button(page, "preflight"))
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_revoking_a_gateway_key_asks_first() -> None:

    admin = make_user("ada", "admin")
    key, _ = apikey_create(name="ci-bot", user=admin)
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US")
        browser_login(page, base, "ada")
        page.goto(f"{base}/apikeys/")
        asked: list[str] = []

        def dismiss(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.dismiss()

        page.once("dialog", dismiss)
        page.click("#key-ci-bot button")
        assert asked and "ci-bot" in asked[0]
        page.wait_for_timeout(500)
        assert page.url == f"{base}/apikeys/"
        assert not revoked(key.pk)

        page.once("dialog", lambda d: d.accept())
        with page.expect_navigation():
            page.click("#key-ci-bot button")
        assert revoked(key.pk)
