"""A user makes, rotates and revokes their own API token in the UI; the key works once shown."""

from __future__ import annotations

import re
from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.models import AuditEvent
from tests.conftest import login

pytestmark = pytest.mark.django_db


def shown_key(html: str) -> str:
    found = re.search(r'<code id="new-token-value">([0-9a-f]{40})</code>', html)
    assert found, "the new key is on the page"
    return found.group(1)


def test_a_viewer_creates_uses_rotates_and_revokes_a_token(viewer: Any) -> None:
    client = login(viewer)
    page = client.get("/accounts/token/")
    assert page.status_code == 200 and 'id="new-token"' not in page.content.decode()
    assert page["Cache-Control"].startswith("max-age=0")
    created = client.post("/accounts/token/", {"action": "rotate"})
    key = shown_key(created.content.decode())
    assert Token.objects.get(user=viewer).key == key
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/clusters/").status_code == 200
    assert (
        api.post("/api/clusters/", {}, format="json").status_code == 403
    )  # still a viewer
    again = client.get("/accounts/token/").content.decode()
    assert key not in again  # shown once
    rotated = shown_key(
        client.post("/accounts/token/", {"action": "rotate"}).content.decode()
    )
    assert rotated != key and api.get("/api/clusters/").status_code == 401
    assert client.post("/accounts/token/", {"action": "revoke"}).status_code == 302
    assert not Token.objects.filter(user=viewer).exists()
    actions = list(
        AuditEvent.objects.filter(actor=viewer)
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["token.create", "token.rotate", "token.revoke"]


def test_it_refuses_an_unknown_action_and_users_without_a_role(
    viewer: Any, norole: Any
) -> None:
    answer = login(viewer).post("/accounts/token/", {"action": "steal"})
    assert answer.status_code == 302 and not Token.objects.exists()
    assert (
        login(norole).post("/accounts/token/", {"action": "rotate"}).status_code == 403
    )
    assert not Token.objects.exists()
