"""The one helper every mutation goes through to leave an audit row."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.db import models
from django.forms.models import model_to_dict
from django.http import HttpRequest

from console.models import AuditEvent


def _valid_ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def client_ip(request: HttpRequest | None) -> str | None:
    """Return the caller's IP, always a valid address or None.

    Behind a trusted proxy (TRUST_X_FORWARDED_FOR) it is X-Forwarded-For's LAST hop: the
    address nginx itself appended ($proxy_add_x_forwarded_for); every hop before it is
    whatever the client sent and proves nothing. Without a valid hop: REMOTE_ADDR.
    """
    if request is None:
        return None
    if getattr(settings, "TRUST_X_FORWARDED_FOR", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            hop = _valid_ip(forwarded.rsplit(",", 1)[-1])
            if hop:
                return hop
    return _valid_ip(request.META.get("REMOTE_ADDR") or "")


# Model fields holding environment variables for vllm serve: their values may be
# tokens (HF_TOKEN, ...), so audit rows and non-admin readers see the names only.
ENV_FIELDS = ("extra_env",)
MASK = "********"


def mask_env(env: Any) -> Any:
    """``{"HF_TOKEN": "hf_..."}`` → ``{"HF_TOKEN": "********"}`` (names kept, values hidden)."""
    if not isinstance(env, dict):
        return env
    return {str(k): MASK for k in env}


def snapshot(obj: models.Model | None) -> dict[str, Any] | None:
    """A JSON-safe copy of a model's fields for the before/after columns (env values masked)."""
    if obj is None:
        return None
    data = model_to_dict(obj)
    for name in ENV_FIELDS:
        if name in data:
            data[name] = mask_env(data[name])
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
        source_ip=_valid_ip(source_ip) if source_ip else client_ip(request),
        request_id=(getattr(request, "request_id", "") if request is not None else "")[
            :64
        ],
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
