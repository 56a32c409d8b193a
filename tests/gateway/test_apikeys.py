"""API keys: the page (admins: every key and the operators' bounds; operators: their own keys) (create shows the secret once, revoke), the apikey command,
hashing, audit."""

from __future__ import annotations

import hashlib
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from console.gateway.services import apikey_create
from console.models import ApiKey, ApiKeyPolicy, AuditEvent
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_it_shows_a_new_key_once_and_stores_only_its_hash(admin: Any) -> None:
    client = login(admin)
    resp = client.post(
        "/apikeys/create/", {"name": "team-a", "rpm": "30", "tpm": "5000"}
    )
    assert resp.status_code == 302
    page = client.get("/apikeys/").content.decode()
    key = ApiKey.objects.get(name="team-a")
    secret = page.split('id="new-secret-value">', 1)[1].split("<", 1)[0]
    assert secret.startswith(key.prefix) and len(secret) > 40
    assert key.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(
        ApiKey.objects.values().get(pk=key.pk)
    )  # only the digest and prefix are kept
    assert (key.rpm, key.tpm, key.created_by) == (30, 5000, admin)
    assert secret not in client.get("/apikeys/").content.decode()  # shown once
    event = AuditEvent.objects.get(action="apikey.create")
    assert (
        event.actor == admin
        and event.target_repr == "team-a"
        and "digest" not in event.after
    )


def test_it_refuses_bad_input_naming_the_field(admin: Any) -> None:
    client = login(admin)
    resp = client.post("/apikeys/create/", {"name": "Bad Name", "rpm": "0", "tpm": "x"})
    assert resp.status_code == 400
    assert set(resp.context["errors"]) == {"rpm", "tpm"}
    resp = client.post("/apikeys/create/", {"name": "Bad Name", "rpm": "5", "tpm": "5"})
    assert resp.status_code == 400 and "name" in resp.context["errors"]
    apikey_create(name="dup", user=admin)
    resp = client.post("/apikeys/create/", {"name": "dup", "rpm": "5", "tpm": "5"})
    assert resp.status_code == 400 and "name" in resp.context["errors"]
    assert (
        ApiKey.objects.count() == 1
        and not AuditEvent.objects.filter(action="apikey.create", actor=admin)
        .exclude(target_repr="dup")
        .exists()
    )


def test_it_revokes_a_key_and_audits_it(admin: Any) -> None:
    key, _ = apikey_create(name="old", user=admin)
    resp = login(admin).post(f"/apikeys/{key.pk}/revoke/")
    assert resp.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert (
        AuditEvent.objects.filter(
            action="apikey.revoke", actor=admin, target_repr="old"
        ).count()
        == 1
    )


def test_it_refuses_viewers_and_anonymous(viewer: Any, client: Any) -> None:
    assert login(viewer).get("/apikeys/").status_code == 403
    assert (
        login(viewer)
        .post("/apikeys/create/", {"name": "x", "rpm": "1", "tpm": "1"})
        .status_code
        == 403
    )
    assert client.get("/apikeys/").status_code == 302  # to the login page
    assert not ApiKey.objects.exists()


def test_an_operator_makes_their_own_keys_within_the_admins_bounds(
    operator: Any, admin: Any
) -> None:
    client = login(operator)
    apikey_create(name="admins-key", user=admin)
    page = client.get("/apikeys/")
    assert page.status_code == 200
    assert "admins-key" not in page.content.decode()  # only their own keys

    over = client.post("/apikeys/create/", {"name": "nb", "rpm": "61", "tpm": "10"})
    assert over.status_code == 400 and set(over.context["errors"]) == {"rpm"}
    assert "60" in over.context["errors"]["rpm"]
    assert not ApiKey.objects.filter(created_by=operator).exists()

    for n in range(3):
        ok = client.post(
            "/apikeys/create/", {"name": f"nb-{n}", "rpm": "60", "tpm": "10"}
        )
        assert ok.status_code == 302
    fourth = client.post("/apikeys/create/", {"name": "nb-3", "rpm": "1", "tpm": "1"})
    assert fourth.status_code == 400 and set(fourth.context["errors"]) == {"name"}
    assert ApiKey.objects.filter(created_by=operator).count() == 3

    # someone else's key is not theirs to revoke (404, untouched); their own is
    others = ApiKey.objects.get(name="admins-key")
    assert client.post(f"/apikeys/{others.pk}/revoke/").status_code == 404
    others.refresh_from_db()
    assert others.revoked_at is None
    mine = ApiKey.objects.get(name="nb-0")
    assert client.post(f"/apikeys/{mine.pk}/revoke/").status_code == 302
    assert (
        client.post(
            "/apikeys/create/", {"name": "nb-3", "rpm": "1", "tpm": "1"}
        ).status_code
        == 302
    )  # a revoked key frees its place
    assert (
        AuditEvent.objects.filter(action="apikey.create", actor=operator).count() == 4
    )


def test_an_admin_sets_the_operators_bounds_audited(operator: Any, admin: Any) -> None:
    bad = login(admin).post(
        "/apikeys/policy/",
        {"max_keys_per_operator": "-1", "max_rpm": "0", "max_tpm": "x"},
    )
    assert bad.status_code == 400
    assert set(bad.context["errors"]) == {"max_keys_per_operator", "max_rpm", "max_tpm"}
    assert not ApiKeyPolicy.objects.exists()
    assert (
        login(operator)
        .post(
            "/apikeys/policy/",
            {"max_keys_per_operator": "9", "max_rpm": "9", "max_tpm": "9"},
        )
        .status_code
        == 403
    )

    ok = login(admin).post(
        "/apikeys/policy/",
        {"max_keys_per_operator": "0", "max_rpm": "5", "max_tpm": "500"},
    )
    assert ok.status_code == 302
    event = AuditEvent.objects.get(action="apikey.policy")
    assert event.actor == admin and event.after["max_rpm"] == 5
    refused = login(operator).post(
        "/apikeys/create/", {"name": "nb", "rpm": "5", "tpm": "500"}
    )
    assert refused.status_code == 400 and "name" in refused.context["errors"]
    assert not ApiKey.objects.filter(created_by=operator).exists()


def test_it_creates_lists_and_revokes_from_the_command_line() -> None:
    out, err = StringIO(), StringIO()
    call_command("apikey", "create", "ci-bot", "--rpm", "10", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    key = ApiKey.objects.get(name="ci-bot")
    assert key.digest == hashlib.sha256(secret.encode()).hexdigest() and key.rpm == 10
    listing = StringIO()
    call_command("apikey", "list", stdout=listing)
    assert (
        "ci-bot" in listing.getvalue()
        and key.prefix in listing.getvalue()
        and secret not in listing.getvalue()
    )
    call_command("apikey", "revoke", "ci-bot", stdout=StringIO())
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert list(
        AuditEvent.objects.order_by("pk").values_list("action", "actor_name")
    ) == [("apikey.create", "system"), ("apikey.revoke", "system")]
    with pytest.raises(CommandError, match="no API key named 'nope'"):
        call_command("apikey", "revoke", "nope")
    with pytest.raises(CommandError, match="name"):
        call_command("apikey", "create", "Not Valid")


def test_the_api_gives_an_operator_the_same_bounds(operator: Any, admin: Any) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(operator)
    assert api.get("/api/apikeys/policy/").json()["max_rpm"] == 60
    over = api.post("/api/apikeys/", {"name": "nb", "rpm": 61}, format="json")
    assert over.status_code == 400 and "rpm" in over.json()
    made = api.post(
        "/api/apikeys/", {"name": "nb", "rpm": 60, "tpm": 10}, format="json"
    )
    assert made.status_code == 201 and made.json()["secret"].startswith("avc-")
    apikey_create(name="admins-key", user=admin)
    assert [k["name"] for k in api.get("/api/apikeys/").json()] == ["nb"]
    assert (
        api.put(
            "/api/apikeys/policy/",
            {"max_keys_per_operator": 9, "max_rpm": 9, "max_tpm": 9},
            format="json",
        ).status_code
        == 403
    )
    api.force_authenticate(admin)
    set_ = api.put(
        "/api/apikeys/policy/",
        {"max_keys_per_operator": 1, "max_rpm": 9, "max_tpm": 9},
        format="json",
    )
    assert set_.status_code == 200 and ApiKeyPolicy.current().max_rpm == 9
    assert AuditEvent.objects.filter(action="apikey.policy", actor=admin).count() == 1
