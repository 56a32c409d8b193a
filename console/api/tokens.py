"""Users' DRF tokens (``Authorization: Token …``): rotate and revoke, audited."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpRequest
from rest_framework.authtoken.models import Token

from console.services.audit import audit_record


def token_rotate(
    *, user: Any, actor: Any = None, request: HttpRequest | None = None
) -> str:
    """New token for ``user`` (replacing any old one); return the key (shown once)."""
    with transaction.atomic():
        replaced = Token.objects.filter(user=user).delete()[0] > 0
        token = Token.objects.create(user=user)
        audit_record(
            action="token.rotate" if replaced else "token.create",
            actor=actor,
            request=request,
            target=user,
            target_repr=f"token of {user.username}",
        )
    return token.key


def token_revoke(
    *, user: Any, actor: Any = None, request: HttpRequest | None = None
) -> bool:
    """Delete ``user``'s token; False when there was none (nothing audited)."""
    with transaction.atomic():
        deleted = Token.objects.filter(user=user).delete()[0] > 0
        if deleted:
            audit_record(
                action="token.revoke",
                actor=actor,
                request=request,
                target=user,
                target_repr=f"token of {user.username}",
            )
    return deleted
