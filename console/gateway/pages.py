"""The API keys page (admins): keys, usage per key and model, create (secret shown once)
and revoke."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.gateway.services import apikey_create, apikey_revoke
from console.gateway.usage import usage_flush
from console.models import ApiKey, ApiUsage
from console.permissions import role_required

SESSION_SECRET = "apikey_new_secret"


@role_required("admin")
def apikey_list(request: HttpRequest) -> HttpResponse:
    usage_flush()  # this process's pending counters, so the page is current
    return render(
        request,
        "console/apikeys.html",
        {
            "keys": ApiKey.objects.select_related("created_by"),
            "usage": ApiUsage.objects.select_related("key"),
            "new_secret": request.session.pop(
                SESSION_SECRET, None
            ),  # shown once, never again
            "errors": {},
            "form": {"rpm": 60, "tpm": 100000},
        },
    )


def _int_field(request: HttpRequest, name: str, errors: dict[str, str]) -> int:
    raw = request.POST.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        errors[name] = _("Enter a whole number of at least 1 (got {value!r}).").format(
            value=raw
        )
    return value


@require_POST
@role_required("admin")
def apikey_create_view(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    name = request.POST.get("name", "").strip()
    rpm, tpm = _int_field(request, "rpm", errors), _int_field(request, "tpm", errors)
    if not errors:
        try:
            key, secret = apikey_create(
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
    return render(
        request,
        "console/apikeys.html",
        {
            "keys": ApiKey.objects.select_related("created_by"),
            "usage": ApiUsage.objects.select_related("key"),
            "new_secret": None,
            "errors": errors,
            "form": {
                "name": name,
                "rpm": request.POST.get("rpm", ""),
                "tpm": request.POST.get("tpm", ""),
            },
        },
        status=400,
    )


@require_POST
@role_required("admin")
def apikey_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(ApiKey, pk=pk)
    apikey_revoke(key=key, user=request.user, request=request)
    messages.success(
        request,
        _("Key {name} revoked; requests with it now get 401.").format(name=key.name),
    )
    return redirect("apikey-list")
