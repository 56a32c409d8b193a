"""Roles: viewer (read), operator (operate, acknowledge, playground), admin (configure, users, keys).

A user's role is the highest of the role groups they belong to; superusers are admins.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import (
    AbstractBaseUser,
    AnonymousUser,
    Group,
    Permission,
)
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from console.constants import ROLE_ADMIN, ROLE_OPERATOR, ROLE_VIEWER, ROLES

# Model permissions granted to each role group (the Django admin checks these too).
ROLE_PERMISSIONS: dict[str, list[str]] = {
    ROLE_VIEWER: ["view_cluster", "view_node", "view_engineprofile"],
    ROLE_OPERATOR: ["view_cluster", "view_node", "view_engineprofile"],
    ROLE_ADMIN: [
        "view_cluster",
        "add_cluster",
        "change_cluster",
        "delete_cluster",
        "view_node",
        "add_node",
        "change_node",
        "delete_node",
        "view_engineprofile",
        "add_engineprofile",
        "change_engineprofile",
        "delete_engineprofile",
        "view_auditevent",
    ],
}


def user_role(user: AbstractBaseUser | AnonymousUser) -> str | None:
    """Return the user's highest role, or None for anonymous users and users without a role."""
    if not user.is_authenticated:
        return None
    if getattr(user, "is_superuser", False):
        return ROLE_ADMIN
    cached = getattr(user, "_console_role", "unset")
    if cached != "unset":
        return cached
    names = set(user.groups.values_list("name", flat=True))  # type: ignore[attr-defined]
    role = next((r for r in reversed(ROLES) if r in names), None)
    setattr(user, "_console_role", role)  # noqa: B010 -- a per-request cache on the user object
    return role


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    """True when the user's role is ``role`` or a higher one."""
    current = user_role(user)
    return current is not None and ROLES.index(current) >= ROLES.index(role)


def role_required(
    role: str,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """View decorator: 403 unless the logged-in user has ``role`` (login itself is enforced by middleware)."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not has_role(request.user, role):
                raise PermissionDenied(f"requires the {role} role")
            return view(request, *args, **kwargs)

        wrapper.required_role = role  # type: ignore[attr-defined]  # read by the permission-matrix test
        return wrapper

    return decorator


def ensure_role_groups() -> None:
    """Create the three role groups with their permissions (idempotent; runs after every migrate)."""
    for role, codenames in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = Permission.objects.filter(
            codename__in=codenames, content_type__app_label="console"
        )
        group.permissions.set(perms)


def set_user_role(user: Any, role: str) -> None:
    """Put the user in exactly one role group; admins also get Django-admin access (is_staff)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
    ensure_role_groups()
    user.groups.set([Group.objects.get(name=role)])
    user.is_staff = role == ROLE_ADMIN
    user.save(update_fields=["is_staff"])
    user.__dict__.pop("_console_role", None)
