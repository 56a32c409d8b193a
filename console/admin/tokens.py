"""API tokens: DRF's token screen replaced by one that masks keys and audits every change.

Separate from users and groups: it subclasses rest_framework.authtoken's admin (not
AuditedAdmin), since a token's pk is its key and must stay out of every log.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from rest_framework.authtoken.admin import TokenAdmin as DRFTokenAdmin
from rest_framework.authtoken.models import TokenProxy

from console.services.audit import audit_record

# --- DRF tokens ---------------------------------------------------------------------
# rest_framework.authtoken's admin lists every token's key in plain text, and its model's
# str() *is* the key, so breadcrumbs, messages and the admin log would copy it too.
# TokenProxy exists only for that admin ("Proxy mapping pk to user pk for use in admin"),
# so it gets a str() without the key; the list shows a prefix; create and delete are audited
# like the API's token_rotate / token_revoke, and the key is shown once, when created.
TokenProxy.__str__ = lambda self: f"token of {self.user}"
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class AuditedTokenAdmin(DRFTokenAdmin):
    """API tokens: a masked list, the key shown once at creation, every change audited."""

    list_display = ("masked_key", "user", "created")

    @admin.display(description=_("key"))
    def masked_key(self, obj: Any) -> str:
        return f"{obj.key[:4]}…"

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        replaced = change or type(obj)._default_manager.filter(user=obj.user).exists()
        super().save_model(request, obj, form, change)
        audit_record(
            action="token.rotate" if replaced else "token.create",
            request=request,
            target=obj.user,
            target_repr=f"token of {obj.user.username}",
        )
        if not change:
            messages.warning(
                request,
                _(
                    "The token of %(user)s is %(key)s. Copy it now: it is not shown again."
                )
                % {"user": obj.user.username, "key": obj.key},
            )

    # Django's admin log keys its rows by pk, and a token's pk is its key: the audit rows
    # above (keyed by the user) replace it.
    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> None:
        return None

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> None:
        return None

    def log_deletion(self, request: HttpRequest, obj: Any, object_repr: str) -> None:
        return None

    def log_deletions(self, request: HttpRequest, queryset: Any) -> None:
        return None

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        user = obj.user
        super().delete_model(request, obj)
        audit_record(
            action="token.revoke",
            request=request,
            target=user,
            target_repr=f"token of {user.username}",
        )
