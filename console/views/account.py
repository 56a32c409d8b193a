"""A user's own REST API token (``Authorization: Token …``): create, rotate, revoke."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from rest_framework.authtoken.models import Token

from console.api.tokens import token_revoke, token_rotate
from console.permissions import role_required


@never_cache  # the page that shows a new key must not be cached anywhere
@role_required("viewer")
def account_token(request: HttpRequest) -> HttpResponse:
    """GET: whether you have a token. POST action=rotate (create or replace; the key is
    shown in this answer only) or action=revoke. Audited like the API and the command."""
    new_key = None
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "rotate":
            new_key = token_rotate(
                user=request.user, actor=request.user, request=request
            )
        elif action == "revoke":
            if token_revoke(user=request.user, actor=request.user, request=request):
                messages.success(request, _("Your API token is revoked."))
            return redirect("account-token")
        else:
            messages.error(
                request,
                _("Unknown action {action!r}; use rotate or revoke.").format(
                    action=action
                ),
            )
            return redirect("account-token")
    token = Token.objects.filter(user=request.user).first()
    return render(
        request,
        "console/account_token.html",
        {"token": token, "new_key": new_key},
    )
