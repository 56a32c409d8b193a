"""The 403 page: styled, in the reader's language, with the navigation, the role the page
needs and who can grant it (a dead end otherwise)."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from console.constants import ROLE_ADMIN, ROLE_OPERATOR, ROLE_VIEWER
from console.permissions import user_role

ROLE_RE = re.compile(
    r"requires the (\w+) role"
)  # console.permissions.role_required's message


def role_label(role: str) -> str:
    return {
        ROLE_VIEWER: _("viewer"),
        ROLE_OPERATOR: _("operator"),
        ROLE_ADMIN: _("admin"),
    }.get(role, role)


def admins() -> list[str]:
    """Usernames of the active users who can grant roles (admins and superusers)."""
    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=ROLE_ADMIN))
    )
    return sorted(set(users.values_list("username", flat=True)))[:10]


def permission_denied(
    request: HttpRequest, exception: Exception | None = None
) -> HttpResponse:
    """``handler403``: which role the page needs, the user's own, and the admins to ask."""
    match = ROLE_RE.search(str(exception or ""))
    needed = match.group(1) if match else ""
    mine = user_role(request.user)
    return render(
        request,
        "403.html",
        {
            "needed_role": role_label(needed) if needed else "",
            "my_role": role_label(mine) if mine else _("no role"),
            "admins": admins() if request.user.is_authenticated else [],
            "path": request.path,
        },
        status=403,
    )
