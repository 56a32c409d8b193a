"""Every mutation made through the Django admin leaves an AuditEvent: inline
formsets, users, groups and the set-password page too, never a password hash."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from console.models import AuditEvent, Node
from tests.conftest import login
from tests.factories import make_cluster

PASSWORD = "Correct-Horse-Battery-42"


class _FormFields(HTMLParser):
    """What a browser would submit for the form with the given id (no JavaScript)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, list[str]] = {}
        self._select: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    def _add(self, name: str, value: str) -> None:
        if "__prefix__" not in name:  # the inlines' empty template row
            self.fields.setdefault(name, []).append(value)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.inside = a.get("id") == self.form_id
            return
        name = a.get("name")
        if not self.inside or (not name and tag != "option"):
            return
        if tag == "input" and name:
            kind = (a.get("type") or "text").lower()
            if kind in {"submit", "button", "image", "reset", "file"}:
                return
            if kind in {"checkbox", "radio"}:
                if "checked" in a:
                    self._add(name, a.get("value") or "on")
                return
            self._add(name, a.get("value") or "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self._add(self._select, a.get("value") or "")
        elif tag == "textarea" and name:
            self._textarea, self._text = name, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self._add(self._textarea, "".join(self._text).removeprefix("\n"))
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self._text.append(data)


def form_data(client: Client, url: str, form_id: str) -> dict[str, Any]:
    """GET an admin page and return its form's current values, ready to post back."""
    page = client.get(url)
    assert page.status_code == 200, url
    parser = _FormFields(form_id)
    parser.feed(page.content.decode())
    assert parser.fields, f"no form #{form_id} on {url}"
    return {k: v if len(v) > 1 else v[0] for k, v in parser.fields.items()}


def post(client: Client, url: str, data: dict[str, Any]) -> None:
    response = client.post(url, data, REMOTE_ADDR="127.0.0.9")
    errors = ""
    if response.context and "adminform" in response.context:
        errors = str(response.context["adminform"].form.errors) + str(
            [fs.formset.errors for fs in response.context["inline_admin_formsets"]]
        )
    elif response.context and "form" in response.context:
        errors = str(response.context["form"].errors)
    assert response.status_code == 302, errors


def event_text(event: AuditEvent) -> str:
    return json.dumps(
        [event.before, event.after, event.message, event.target_repr], default=str
    )


@pytest.fixture
def superuser(db: Any) -> User:
    return User.objects.create_superuser("sam", "sam@example.com", "pw-sam")


@pytest.mark.django_db
def test_it_audits_node_edits_made_in_the_cluster_inline(admin: Any) -> None:
    cluster = make_cluster("inl", nodes=3)
    kept, gone = Node.objects.get(name="inl-n1"), Node.objects.get(name="inl-n2")
    client = login(admin)
    url = f"/admin/console/cluster/{cluster.pk}/change/"
    data = form_data(client, url, "cluster_form")
    prefix = next(k for k in data if k.endswith("-TOTAL_FORMS")).removesuffix(
        "-TOTAL_FORMS"
    )
    assert data[f"{prefix}-TOTAL_FORMS"] == "3"
    data[f"{prefix}-1-api_port"] = "29999"  # edit inl-n1
    data[f"{prefix}-2-DELETE"] = "on"  # delete inl-n2
    data.update(  # add inl-n9
        {
            f"{prefix}-TOTAL_FORMS": "4",
            f"{prefix}-3-name": "inl-n9",
            f"{prefix}-3-rank": "3",
            f"{prefix}-3-role": data[f"{prefix}-1-role"],
            f"{prefix}-3-management_ip": "127.0.2.9",
            f"{prefix}-3-api_port": "28009",
            f"{prefix}-3-link_mode": data[f"{prefix}-1-link_mode"],
            f"{prefix}-3-cluster": str(cluster.pk),
            f"{prefix}-3-id": "",
        }
    )
    post(client, url, data)

    assert Node.objects.get(pk=kept.pk).api_port == 29999
    update = AuditEvent.objects.get(action="node.update")
    assert update.actor_name == "ada" and update.actor == admin
    assert update.source_ip == "127.0.0.9"
    assert (update.target_type, update.target_id) == ("console.Node", str(kept.pk))
    assert update.target_repr == str(kept)
    assert update.before["api_port"] == 28001 and update.after["api_port"] == 29999
    assert update.before["name"] == update.after["name"] == "inl-n1"

    create = AuditEvent.objects.get(action="node.create")
    created = Node.objects.get(name="inl-n9")
    assert create.actor_name == "ada" and create.target_id == str(created.pk)
    assert create.before is None and create.after["api_port"] == 28009

    delete = AuditEvent.objects.get(action="node.delete")
    assert not Node.objects.filter(pk=gone.pk).exists()
    assert delete.actor_name == "ada" and delete.target_repr == str(gone)
    assert delete.before["id"] == gone.pk and delete.before["name"] == "inl-n2"
    assert delete.after is None

    # The untouched inline rows write nothing; the parent's save is its own row.
    assert AuditEvent.objects.filter(action__startswith="node.").count() == 3
    assert AuditEvent.objects.filter(action="cluster.update").count() == 1


@pytest.mark.django_db
def test_it_audits_a_user_created_in_the_admin_without_the_hash(
    superuser: User,
) -> None:
    client = login(superuser)
    post(
        client,
        "/admin/auth/user/add/",
        {
            "username": "olga",
            "usable_password": "true",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
    )
    olga = User.objects.get(username="olga")
    assert olga.check_password(PASSWORD)
    event = AuditEvent.objects.get(action="user.create")
    assert event.actor == superuser and event.actor_name == "sam"
    assert (event.target_type, event.target_id) == ("auth.User", str(olga.pk))
    assert event.before is None
    assert event.after["username"] == "olga" and event.after["is_staff"] is False
    assert event.after["password_changed"] is True
    assert event.after["usable_password"] is True
    assert "password" not in event.after
    text = event_text(event)
    assert olga.password not in text and PASSWORD not in text
    assert "pbkdf2" not in text


@pytest.mark.django_db
def test_it_audits_a_user_change_with_groups_before_and_after(
    superuser: User,
) -> None:
    olga = User.objects.create_user("olga", password=PASSWORD)
    group = Group.objects.create(name="night-shift")
    client = login(superuser)
    url = f"/admin/auth/user/{olga.pk}/change/"
    data = form_data(client, url, "user_form")
    data.update({"first_name": "Olga", "is_staff": "on", "groups": [str(group.pk)]})
    post(client, url, data)

    event = AuditEvent.objects.get(action="user.update")
    assert event.actor_name == "sam" and event.target_id == str(olga.pk)
    assert event.before["first_name"] == "" and event.after["first_name"] == "Olga"
    assert event.before["is_staff"] is False and event.after["is_staff"] is True
    assert event.before["groups"] == [] and event.after["groups"] == ["night-shift"]
    assert "password" not in event.before and "password" not in event.after
    assert "password_changed" not in event.after  # the change form cannot touch it
    assert olga.password not in event_text(event)


@pytest.mark.django_db
def test_it_audits_the_admin_password_change_without_values(
    superuser: User,
) -> None:
    olga = User.objects.create_user("olga", password="Old-Password-Value-7")
    old_hash = olga.password
    client = login(superuser)
    url = f"/admin/auth/user/{olga.pk}/password/"
    post(
        client,
        url,
        {"usable_password": "true", "password1": PASSWORD, "password2": PASSWORD},
    )
    olga.refresh_from_db()
    assert olga.check_password(PASSWORD)
    event = AuditEvent.objects.get(action="user.password_change")
    assert event.actor_name == "sam" and event.source_ip == "127.0.0.9"
    assert (event.target_type, event.target_id) == ("auth.User", str(olga.pk))
    assert event.after["password_changed"] is True
    assert "password" not in event.before and "password" not in event.after
    text = event_text(event)
    for secret in (old_hash, olga.password, PASSWORD, "Old-Password-Value-7"):
        assert secret not in text
    assert "pbkdf2" not in text

    # A rejected change (the two fields differ) changes nothing and records nothing.
    response = client.post(
        url,
        {"usable_password": "true", "password1": PASSWORD, "password2": "other"},
    )
    assert response.status_code == 200
    assert AuditEvent.objects.filter(action="user.password_change").count() == 1


@pytest.mark.django_db
def test_it_audits_disabling_password_login(superuser: User) -> None:
    olga = User.objects.create_user("olga", password=PASSWORD)
    client = login(superuser)
    post(
        client,
        f"/admin/auth/user/{olga.pk}/password/",
        {"usable_password": "false", "unset-password": "1"},
    )
    olga.refresh_from_db()
    assert not olga.has_usable_password()
    event = AuditEvent.objects.get(action="user.password_change")
    assert event.before["usable_password"] is True
    assert event.after["usable_password"] is False
    assert event.after["password_changed"] is True
    assert olga.password not in event_text(event)


@pytest.mark.django_db
def test_it_audits_a_user_delete_without_the_hash(superuser: User) -> None:
    olga = User.objects.create_user("olga", password=PASSWORD)
    client = login(superuser)
    post(client, f"/admin/auth/user/{olga.pk}/delete/", {"post": "yes"})
    assert not User.objects.filter(username="olga").exists()
    event = AuditEvent.objects.get(action="user.delete")
    assert event.actor_name == "sam" and event.target_repr == "olga"
    assert event.before["username"] == "olga" and event.before["id"] == olga.pk
    assert "password" not in event.before
    assert olga.password not in event_text(event)


@pytest.mark.django_db
def test_it_audits_group_create_change_and_delete(superuser: User) -> None:
    from django.contrib.auth.models import Permission

    view_audit = Permission.objects.get(
        codename="view_auditevent", content_type__app_label="console"
    )
    change_node = Permission.objects.get(
        codename="change_node", content_type__app_label="console"
    )
    client = login(superuser)
    post(
        client,
        "/admin/auth/group/add/",
        {"name": "auditors", "permissions": [str(view_audit.pk)]},
    )
    group = Group.objects.get(name="auditors")
    created = AuditEvent.objects.get(action="group.create")
    assert created.actor_name == "sam" and created.target_id == str(group.pk)
    assert created.before is None
    assert created.after["name"] == "auditors"
    assert created.after["permissions"] == ["console.view_auditevent"]

    url = f"/admin/auth/group/{group.pk}/change/"
    data = form_data(client, url, "group_form")
    data["permissions"] = [str(view_audit.pk), str(change_node.pk)]
    post(client, url, data)
    updated = AuditEvent.objects.get(action="group.update")
    assert updated.before["permissions"] == ["console.view_auditevent"]
    assert updated.after["permissions"] == [
        "console.change_node",
        "console.view_auditevent",
    ]

    post(client, f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"})
    deleted = AuditEvent.objects.get(action="group.delete")
    assert deleted.target_repr == "auditors" and deleted.after is None
    assert deleted.before["permissions"] == [
        "console.change_node",
        "console.view_auditevent",
    ]
