"""API key writes (create, revoke; audited) and how a request presents its key (the
gateway looks keys up in its snapshot, console.gateway.snapshot)."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _

from console.models import ApiKey, ApiKeyPolicy
from console.permissions import has_role
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


def keys_visible_to(user: Any) -> QuerySet[ApiKey]:
    """Admins see every key; an operator sees the keys they created."""
    keys = ApiKey.objects.select_related("created_by")
    return keys if has_role(user, "admin") else keys.filter(created_by=user)


def apikey_create_for(
    *,
    name: str,
    user: Any,
    rpm: int,
    tpm: int,
    request: HttpRequest | None = None,
) -> tuple[ApiKey, str]:
    """A key created on the page: an admin's without bounds; an operator's within the
    admins' ApiKeyPolicy (active keys per operator, rpm and tpm per key). Raises
    ValidationError naming the field and the bound."""
    if has_role(user, "admin"):
        return apikey_create(name=name, user=user, rpm=rpm, tpm=tpm, request=request)
    policy = ApiKeyPolicy.current()
    errors: dict[str, str] = {}
    if rpm > policy.max_rpm:
        errors["rpm"] = _(
            "At most {n} requests per minute for a key you create; ask an admin for more."
        ).format(n=policy.max_rpm)
    if tpm > policy.max_tpm:
        errors["tpm"] = _(
            "At most {n} tokens per minute for a key you create; ask an admin for more."
        ).format(n=policy.max_tpm)
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        # the user's row, locked: two creates at once cannot both pass the count
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        active = ApiKey.objects.filter(created_by=user, revoked_at=None).count()
        if active >= policy.max_keys_per_operator:
            raise ValidationError(
                {
                    "name": _(
                        "You have {active} active keys and operators may have {n}; "
                        "revoke one first, or ask an admin."
                    ).format(active=active, n=policy.max_keys_per_operator)
                }
            )
        return apikey_create(name=name, user=user, rpm=rpm, tpm=tpm, request=request)


def apikey_policy_update(
    *,
    user: Any,
    max_keys_per_operator: int,
    max_rpm: int,
    max_tpm: int,
    request: HttpRequest | None = None,
) -> ApiKeyPolicy:
    """An admin sets what operators may create for themselves (audited)."""
    with transaction.atomic():
        policy = ApiKeyPolicy.objects.select_for_update().order_by("pk").first()
        policy = policy or ApiKeyPolicy()
        before = snapshot(policy) if policy.pk else None
        policy.max_keys_per_operator = max_keys_per_operator
        policy.max_rpm, policy.max_tpm = max_rpm, max_tpm
        policy.full_clean()
        policy.save()
        audit_record(
            action="apikey.policy",
            actor=user,
            request=request,
            target=policy,
            before=before,
            after=snapshot(policy),
        )
    return policy


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
