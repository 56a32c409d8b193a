"""Browser: the admin rule editor is a styled form beside a live preview of what the rule
would match now, from the same observations the rule engine evaluates."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from django.utils import timezone

from console.models import Node
from console.services.inventory import demo_seed
from monitoring.alerts.services import alert_rules_seed
from monitoring.models.alerts import AlertRule
from tests.alerts.helpers import ingest
from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_rule_editor_previews_what_the_rule_would_match() -> None:

    demo_seed()
    alert_rules_seed()
    ingest(Node.objects.get(name="ascend-02"), timezone.now(), temp=91.0)
    rule = AlertRule.objects.get(name="NPU temperature high")
    make_user("ada", "admin")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)
        page = browser.new_page(locale="en-US", viewport={"width": 1440, "height": 900})
        browser_login(page, base, "ada")
        page.click("#nav-rules")
        page.click(f"#rule-{rule.pk} a")
        # Styled: the form and the preview side by side, inputs with borders.
        form = page.locator("#rule-form").bounding_box()
        preview = page.locator("#rule-preview").bounding_box()
        assert form and preview and preview["x"] > form["x"] + form["width"] - 1
        border = page.eval_on_selector(
            "#rule-form input[name=threshold]",
            "e => getComputedStyle(e).borderTopStyle",
        )
        assert border == "solid"
        # Rendered with the page: the one hot NPU would match.
        summary = page.text_content("#rule-preview-summary") or ""
        assert summary.startswith("1 of 8"), summary
        assert page.locator("#rule-preview-table tr.preview-match").count() == 1
        assert "91 °C" in (
            page.text_content("#rule-preview-table tr.preview-match") or ""
        )
        # Lower the threshold: the preview follows without saving.
        page.fill("#rule-form input[name=threshold]", "30")
        page.wait_for_function(
            "(document.getElementById('rule-preview-summary')?.textContent || '').startsWith('8 of 8')",
            timeout=10_000,
        )
