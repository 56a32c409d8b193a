from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console.permissions import has_role, user_role


def console(request: HttpRequest) -> dict[str, Any]:
    """Role flags for templates (hide buttons a user may not press; the views still check)."""
    user = request.user
    return {
        "user_role": user_role(user),
        "can_operate": has_role(user, "operator"),
        "can_admin": has_role(user, "admin"),
    }
