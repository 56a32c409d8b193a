"""DRF tokens in the admin: created and deleted with an audit row, never listed or logged in
plain text (the key is shown once, to the superuser who created it)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from console.models import AuditEvent
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db: Any) -> Any:
    return get_user_model().objects.create_superuser("root", password="pw-root-123")


def test_a_token_made_in_the_admin_is_audited_and_its_key_shown_once(
    superuser: Any, viewer: Any
) -> None:
    client = login(superuser)
    answer = client.post(
        "/admin/authtoken/tokenproxy/add/", {"user": viewer.pk}, follow=True
    )
    assert answer.status_code == 200
    key = Token.objects.get(user=viewer).key
    assert answer.content.decode().count(key) == 1  # the one-time message
    row = AuditEvent.objects.get(action="token.create")
    assert row.actor_name == "root" and row.target_id == str(viewer.pk)
    assert key not in str(
        AuditEvent.objects.values_list(
            "target_id", "target_repr", "before", "after", "message"
        )[:]
    )
    assert not LogEntry.objects.filter(object_id=key).exists()
    assert key not in str(
        LogEntry.objects.values_list("object_repr", "change_message")[:]
    )
    listing = client.get("/admin/authtoken/tokenproxy/").content.decode()
    assert key not in listing and key[:4] in listing
    change = client.get(
        f"/admin/authtoken/tokenproxy/{viewer.pk}/change/"
    ).content.decode()
    assert key not in change

    answer = client.post(
        f"/admin/authtoken/tokenproxy/{viewer.pk}/delete/", {"post": "yes"}, follow=True
    )
    assert answer.status_code == 200 and key not in answer.content.decode()
    assert not Token.objects.filter(user=viewer).exists()
    assert AuditEvent.objects.filter(
        action="token.revoke", target_id=str(viewer.pk)
    ).exists()
