"""DRF permission classes for the three roles."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from console.permissions import has_role


class _RolePermission(BasePermission):
    role = "viewer"
    message = "This endpoint needs the viewer role."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(
            request.user
            and request.user.is_authenticated
            and has_role(request.user, self.role)
        )


class IsViewer(_RolePermission):
    role = "viewer"
    message = (
        "This endpoint needs the viewer role (ask an admin to add you to a role group)."
    )


class IsOperator(_RolePermission):
    role = "operator"
    message = "This endpoint needs the operator role."


class IsAdmin(_RolePermission):
    role = "admin"
    message = "This endpoint needs the admin role."
