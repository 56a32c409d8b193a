"""The one helper every mutation goes through to leave an audit row."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.forms.models import model_to_dict
from django.http import HttpRequest

from console.models import AuditEvent


def client_ip(request: HttpRequest | None) -> str | None:
    """Return the caller's IP: X-Forwarded-For's first hop only behind a trusted proxy."""
    if request is None:
        return None
    if getattr(settings, "TRUST_X_FORWARDED_FOR", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            return forwarded.split(",")[0].strip() or None
    return request.META.get("REMOTE_ADDR") or None


def snapshot(obj: models.Model | None) -> dict[str, Any] | None:
    """A JSON-safe copy of a model's fields for the before/after columns."""
    if obj is None:
        return None
    data = model_to_dict(obj)
    return {
        k: (
            v
            if isinstance(v, (str, int, float, bool, list, dict, type(None)))
            else str(v)
        )
        for k, v in data.items()
    }


def audit_record(
    *,
    action: str,
    actor: Any = None,
    request: HttpRequest | None = None,
    target: models.Model | None = None,
    target_repr: str = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    result: str = AuditEvent.Result.SUCCESS,
    message: str = "",
    source_ip: str | None = None,
) -> AuditEvent:
    """Write one audit row. ``actor`` defaults to the request's user; system actions pass actor=None."""
    if actor is None and request is not None and request.user.is_authenticated:
        actor = request.user
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=getattr(actor, "username", "") or "system",
        source_ip=source_ip or client_ip(request),
        request_id=getattr(request, "request_id", "") if request is not None else "",
        action=action,
        target_type=target._meta.label if target is not None else "",
        target_id=str(target.pk)
        if target is not None and target.pk is not None
        else "",
        target_repr=(target_repr or (str(target) if target is not None else ""))[:200],
        before=before,
        after=after,
        result=result,
        message=message,
    )
