"""API key writes (create, revoke; audited) and how a request presents its key (the
gateway looks keys up in its snapshot, console.gateway.snapshot)."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.models import ApiKey
from console.services.audit import audit_record, snapshot

KEY_PREFIX = "avc-"  # visible marker: "Ascend vLLM console" key
PREFIX_LEN = 12  # "avc-" + 8 random characters, shown in lists to recognise a key


def key_digest(secret: str) -> str:
    """sha256 hex of a key's secret (the secret has 256 bits of entropy, so a fast hash
    is enough)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def apikey_create(
    *,
    name: str,
    user: Any,
    rpm: int = 60,
    tpm: int = 100_000,
    request: HttpRequest | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret; the secret is shown once and only its
    sha256 is kept.

    Raises django ValidationError (keyed by field) for a bad name or limits, or a
    duplicate name.
    """
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        name=name,
        prefix=secret[:PREFIX_LEN],
        digest=key_digest(secret),
        rpm=rpm,
        tpm=tpm,
        created_by=user if getattr(user, "pk", None) else None,
    )
    key.full_clean()
    with transaction.atomic():
        key.save()
        audit_record(
            action="apikey.create",
            actor=user,
            request=request,
            target=key,
            after=_public(key),
        )
    return key, secret


def apikey_revoke(
    *, key: ApiKey, user: Any, request: HttpRequest | None = None
) -> ApiKey:
    """Revoke a key (idempotent: revoking a revoked key changes nothing but is still
    audited)."""
    with transaction.atomic():
        before = _public(key)
        if key.revoked_at is None:
            ApiKey.objects.filter(pk=key.pk, revoked_at=None).update(
                revoked_at=timezone.now()
            )
            key.refresh_from_db()
        audit_record(
            action="apikey.revoke",
            actor=user,
            request=request,
            target=key,
            before=before,
            after=_public(key),
        )
    return key


def _public(key: ApiKey) -> dict[str, Any] | None:
    data = snapshot(key)
    if data is not None:
        data.pop("digest", None)
    return data


def secret_from_headers(headers: Any) -> str | None:
    """The key from ``Authorization: Bearer <key>`` (OpenAI) or ``x-api-key``
    (Anthropic)."""
    auth = headers.get("authorization", "")  # lower-case names (case-blind in Django's)
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None
