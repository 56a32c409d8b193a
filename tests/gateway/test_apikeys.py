"""API keys: the admin page (create shows the secret once, revoke), the apikey command,
hashing, audit."""

from __future__ import annotations

import hashlib
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from console.gateway.services import apikey_create
from console.models import ApiKey, AuditEvent
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


def test_it_refuses_operators_and_anonymous(operator: Any, client: Any) -> None:
    assert login(operator).get("/apikeys/").status_code == 403
    assert (
        login(operator)
        .post("/apikeys/create/", {"name": "x", "rpm": "1", "tpm": "1"})
        .status_code
        == 403
    )
    assert client.get("/apikeys/").status_code == 302  # to the login page
    assert not ApiKey.objects.exists()


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
