"""Roles: viewer < operator < admin, from group membership; the demo users get one each."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from console.permissions import has_role, user_role
from console.services.inventory import credentials_path, demo_users_ensure


@pytest.mark.django_db
def test_it_orders_roles(viewer: Any, operator: Any, admin: Any, norole: Any) -> None:
    assert (
        user_role(viewer),
        user_role(operator),
        user_role(admin),
        user_role(norole),
    ) == ("viewer", "operator", "admin", None)
    assert has_role(operator, "viewer") and not has_role(viewer, "operator")
    assert has_role(admin, "operator") and not has_role(operator, "admin")
    assert not has_role(norole, "viewer")


@pytest.mark.django_db
def test_it_gives_viewers_read_only_model_permissions(
    viewer: Any, operator: Any, admin: Any
) -> None:
    assert viewer.has_perm("console.view_node") and not viewer.has_perm(
        "console.change_node"
    )
    assert not operator.has_perm("console.change_cluster")
    assert admin.has_perm("console.change_cluster") and admin.is_staff
    assert set(Group.objects.values_list("name", flat=True)) >= {
        "viewer",
        "operator",
        "admin",
    }


@pytest.mark.django_db
def test_it_creates_demo_users_once_with_random_passwords() -> None:
    from django.contrib.auth import authenticate

    passwords = demo_users_ensure()
    assert passwords is not None and set(passwords) == {"admin", "operator", "viewer"}
    assert len(set(passwords.values())) == 3
    text = credentials_path().read_text()
    for user, password in passwords.items():
        assert f"{user}\t{password}" in text
        assert user_role(authenticate(username=user, password=password)) == user
    assert oct(credentials_path().stat().st_mode & 0o777) == "0o600"
    assert demo_users_ensure() is None  # second run: nothing regenerated
