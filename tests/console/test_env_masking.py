"""Engine env values (tokens) are for admins: viewers and operators see the names only,
and audit rows never hold the values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from console.models import AuditEvent
from console.services.inventory_admin import profile_update

pytestmark = pytest.mark.django_db
TOKEN = "hf_SeCrEtToKeN1234567890"


def profile_of(user: Any, pk: int) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(user)
    return client.get(f"/api/profiles/{pk}/").json()


def test_only_admins_read_env_values(
    cluster: Any, viewer: Any, operator: Any, admin: Any
) -> None:
    profile = cluster.profile
    profile.extra_env = {"HF_TOKEN": TOKEN}
    profile.save(update_fields=["extra_env"])
    for user in (viewer, operator):
        data = profile_of(user, profile.pk)
        assert data["extra_env"] == {"HF_TOKEN": "********"}
        assert TOKEN not in json.dumps(data)
    assert profile_of(admin, profile.pk)["extra_env"] == {"HF_TOKEN": TOKEN}
    client = APIClient()
    client.force_authenticate(viewer)
    assert TOKEN not in client.get("/api/profiles/").content.decode()


def test_audit_rows_hold_env_names_not_values(cluster: Any, admin: Any) -> None:
    profile_update(
        profile=cluster.profile, changes={"extra_env": {"HF_TOKEN": TOKEN}}, actor=admin
    )
    row = AuditEvent.objects.get(action="profile.update")
    assert TOKEN not in json.dumps([row.before, row.after])
    assert row.after["extra_env"] == {"HF_TOKEN": "********"}


def test_admin_changes_to_env_are_audited_without_values(
    cluster: Any, admin: Any
) -> None:
    from tests.conftest import login

    client = login(admin)
    page = client.get(f"/admin/console/engineprofile/{cluster.profile.pk}/change/")
    assert page.status_code == 200
    from console.admin import audit_snapshot

    cluster.profile.extra_env = {"HF_TOKEN": TOKEN}
    assert TOKEN not in json.dumps(audit_snapshot(cluster.profile))
