"""Users and groups: Django's stock screens, replaced by audited subclasses.

Separate from the inventory screens: these re-register django.contrib.auth's models
(unregister, then register the audited screen) and record password changes.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db import router, transaction
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from console.admin.audited import AuditedAdmin
from console.services.audit import audit_record

# Users and groups: the stock screens (where operators create users) write no audit
# row, so they are replaced by audited subclasses of the same screens.
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    """Django's user admin, audited; the password hash never reaches before/after."""

    audit_secret_fields = ("password",)

    def audit_snapshot(self, obj: Model | None) -> dict[str, Any] | None:
        data = super().audit_snapshot(obj)
        if data is not None and isinstance(obj, User):
            data["usable_password"] = obj.has_usable_password()
        return data

    @method_decorator(sensitive_post_parameters())
    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        """The admin's set-password page, audited as user.password_change (no values)."""
        with transaction.atomic(using=router.db_for_write(self.model)):
            old = self.get_object(request, unquote(id))
            before = self.audit_snapshot(old)
            response = super().user_change_password(request, id, form_url)
            if old is None:  # the stock view answered 404
                return response
            new = User._default_manager.filter(pk=old.pk).first()
            # Only a saved change moves the hash; a rejected form leaves no row.
            if new is not None and new.password != old.password:
                audit_record(
                    action="user.password_change",
                    request=request,
                    target=new,
                    before=before,
                    after={
                        **(self.audit_snapshot(new) or {}),
                        **self.audit_secret_changes(old, new),
                    },
                )
            return response


@admin.register(Group)
class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    """Django's group admin, audited (permissions recorded as app_label.codename)."""
