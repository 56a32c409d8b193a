"""Browser: no dead ends. A page your role may not open answers with the console's own
403 (navigation, your language, the role it needs, the admins who can grant it), the
playground's snippets say where CONSOLE_API_KEY comes from, and an operator makes their
own key."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.e2e.test_dashboard import (
    browser_login,
    chromium,
    uvicorn_server,
)
from tests.factories import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_forbidden_page_says_who_can_grant_access_in_the_readers_language() -> None:

    make_user("ada", "admin")
    make_user("vera", "viewer")
    make_user("otto", "operator")
    with ExitStack() as stack:
        base = stack.enter_context(uvicorn_server())
        browser = chromium(stack)

        zh = browser.new_context(locale="zh-CN").new_page()
        browser_login(zh, base, "vera")
        response = zh.goto(f"{base}/playground/")
        assert response is not None and response.status == 403
        assert zh.is_visible("header.topbar nav")  # the navigation is there
        role = zh.text_content("#forbidden-role") or ""
        assert "操作员" in role and "查看者" in role, role
        assert "ada" in (zh.text_content("#forbidden-admins") or "")
        assert "Forbidden" not in (zh.content() or "")

        en = browser.new_context(locale="en-US").new_page()
        browser_login(en, base, "otto")
        response = en.goto(f"{base}/alerts/rules/new")
        assert response is not None and response.status == 403
        assert "needs the admin role" in (en.text_content("#forbidden-role") or "")
        assert "ada" in (en.text_content("#forbidden-admins") or "")

        # The operator's playground snippet sends them to the API keys page, where
        # they create their own key within the admins' bounds.
        en.goto(f"{base}/playground/")
        assert "API keys page" in (en.text_content("#pg-key-hint") or "")
        en.click("#pg-copy-curl")
        snippet = en.text_content("#pg-snippet") or ""
        assert snippet.startswith("# CONSOLE_API_KEY") and "/apikeys/" in snippet
        en.goto(f"{base}/apikeys/")
        assert "at most 3 active" in (en.text_content("#key-bounds") or "")
        en.fill("input[name=name]", "otto-notebook")
        en.click("form[action$='create/'] button[type=submit]")
        secret = en.text_content("#new-secret-value") or ""
        assert secret.startswith("avc-"), secret
