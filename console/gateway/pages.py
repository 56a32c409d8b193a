"""The API keys page: keys, usage per key and model, create (secret shown once) and
revoke. Admins see and manage every key and set what operators may create; an operator
sees, creates (within that policy) and revokes their own keys."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.gateway.services import (
    apikey_create_for,
    apikey_policy_update,
    apikey_revoke,
    keys_visible_to,
)
from console.gateway.usage import usage_flush
from console.models import ApiKeyPolicy, ApiUsage
from console.permissions import has_role, role_required

SESSION_SECRET = "apikey_new_secret"


def _page(
    request: HttpRequest,
    *,
    errors: dict[str, str] | None = None,
    form: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    keys = keys_visible_to(request.user)
    policy = ApiKeyPolicy.current()
    return render(
        request,
        "console/apikeys.html",
        {
            "keys": keys,
            "usage": ApiUsage.objects.select_related("key").filter(key__in=keys),
            "new_secret": request.session.pop(SESSION_SECRET, None)
            if not errors
            else None,  # shown once, never again
            "errors": errors or {},
            "form": form
            or {"rpm": min(60, policy.max_rpm), "tpm": min(100000, policy.max_tpm)},
            "policy": policy,
            "is_admin": has_role(request.user, "admin"),
        },
        status=status,
    )


@role_required("operator")
def apikey_list(request: HttpRequest) -> HttpResponse:
    usage_flush()  # this process's pending counters, so the page is current
    return _page(request)


def _int_field(
    request: HttpRequest, name: str, errors: dict[str, str], *, minimum: int = 1
) -> int:
    raw = request.POST.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum or value > 2**31 - 1:
        errors[name] = _(
            "Enter a whole number of at least {minimum} (got {value!r})."
        ).format(minimum=minimum, value=raw)
    return value


@require_POST
@role_required("operator")
def apikey_create_view(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    name = request.POST.get("name", "").strip()
    rpm, tpm = _int_field(request, "rpm", errors), _int_field(request, "tpm", errors)
    if not errors:
        try:
            key, secret = apikey_create_for(
                name=name, user=request.user, rpm=rpm, tpm=tpm, request=request
            )
        except ValidationError as exc:
            errors = {
                field: " ".join(str(m) for m in msgs)
                for field, msgs in exc.message_dict.items()
            }
        else:
            request.session[SESSION_SECRET] = {"name": key.name, "secret": secret}
            return redirect("apikey-list")
    form = {
        "name": name,
        "rpm": request.POST.get("rpm", ""),
        "tpm": request.POST.get("tpm", ""),
    }
    return _page(request, errors=errors, form=form, status=400)


@require_POST
@role_required("admin")
def apikey_policy_view(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    keys = _int_field(request, "max_keys_per_operator", errors, minimum=0)
    rpm = _int_field(request, "max_rpm", errors)
    tpm = _int_field(request, "max_tpm", errors)
    if not errors:
        try:
            apikey_policy_update(
                user=request.user,
                max_keys_per_operator=keys,
                max_rpm=rpm,
                max_tpm=tpm,
                request=request,
            )
        except ValidationError as exc:
            errors = {
                f: " ".join(str(m) for m in msgs)
                for f, msgs in exc.message_dict.items()
            }
        else:
            messages.success(request, _("Operators' key policy saved."))
            return redirect("apikey-list")
    return _page(request, errors=errors, status=400)


@require_POST
@role_required("operator")
def apikey_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(keys_visible_to(request.user), pk=pk)  # others' keys: 404
    apikey_revoke(key=key, user=request.user, request=request)
    messages.success(
        request,
        _("Key {name} revoked; requests with it now get 401.").format(name=key.name),
    )
    return redirect("apikey-list")
