"""Gateway API keys through the REST API (admin): create (secret once), list with usage, revoke."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from console.models import ApiKey, ApiUsage, AuditEvent

pytestmark = pytest.mark.django_db


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.django_db(
    transaction=True
)  # the async gateway looks keys up from another thread
def test_an_admin_creates_a_key_that_the_gateway_accepts_then_revokes_it(
    admin: Any, cluster: Any
) -> None:
    created = api(admin).post(
        "/api/apikeys/", {"name": "team-a", "rpm": 30, "tpm": 5000}, format="json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["secret"]
    assert (
        secret.startswith(body["prefix"])
        and body["rpm"] == 30
        and body["created_by"] == admin.username
    )
    key = ApiKey.objects.get(name="team-a")
    assert secret not in key.digest and len(key.digest) == 64  # stored hashed
    gateway = Client()
    assert gateway.get("/v1/models").status_code == 401
    assert (
        gateway.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code
        == 200
    )
    listed = api(admin).get("/api/apikeys/").json()
    assert [k["name"] for k in listed] == ["team-a"] and "secret" not in listed[
        0
    ]  # never shown again
    revoked = api(admin).post(f"/api/apikeys/{key.pk}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    assert (
        gateway.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code
        == 401
    )
    assert list(
        AuditEvent.objects.filter(target_id=str(key.pk))
        .values_list("action", flat=True)
        .order_by("pk")
    ) == ["apikey.create", "apikey.revoke"]


def test_bad_input_names_the_field_and_creates_nothing(admin: Any) -> None:
    bad = api(admin).post("/api/apikeys/", {"name": "x", "rpm": 0}, format="json")
    assert bad.status_code == 400 and "rpm" in bad.json()
    api(admin).post("/api/apikeys/", {"name": "dup"}, format="json")
    again = api(admin).post("/api/apikeys/", {"name": "dup"}, format="json")
    assert again.status_code == 400 and "name" in again.json()
    assert ApiKey.objects.count() == 1


def test_usage_per_model_is_listed_and_only_admins_see_others_keys(
    admin: Any, operator: Any
) -> None:
    key = ApiKey.objects.create(name="k", prefix="sk-x", digest="d" * 64)
    ApiUsage.objects.create(
        key=key, model="qwen3.5", requests=3, prompt_tokens=30, completion_tokens=90
    )
    assert api(operator).get("/api/apikeys/").json() == []  # not theirs
    usage = api(admin).get("/api/apikeys/").json()[0]["usage"]
    assert usage == [
        {
            "model": "qwen3.5",
            "requests": 3,
            "prompt_tokens": 30,
            "completion_tokens": 90,
        }
    ]
