"""Admin screen for notification channels (audited like the inventory; credentials write-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from console.admin import AuditedAdmin
from console.constants import ROLE_ADMIN
from console.permissions import has_role
from monitoring.alerts.transport import redacted
from monitoring.models import NotificationChannel


class NotificationChannelForm(forms.ModelForm):
    """The signing secret is write-only: left empty on edit it keeps the stored one."""

    url = forms.URLField(
        label=_("URL"),
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=NotificationChannel._meta.get_field("url").help_text,
    )
    secret = forms.CharField(
        label=_("signing secret"),
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=_(
            "DingTalk: the SEC… secret of signed-request mode; Feishu: the signature "
            "secret. Never shown again; leave empty to keep the stored one."
        ),
    )
    clear_secret = forms.BooleanField(
        label=_("clear the signing secret"), required=False
    )

    class Meta:
        model = NotificationChannel
        fields = [
            "name",
            "kind",
            "url",
            "secret",
            "emails",
            "format",
            "min_severity",
            "send_resolved",
            "enabled",
        ]

    def clean_secret(self) -> str:
        value: str = self.cleaned_data.get("secret") or ""
        if any(ch < " " for ch in value):
            raise forms.ValidationError(
                _("The secret cannot contain control characters.")
            )
        if not value and self.instance.pk and not self.data.get("clear_secret"):
            return self.instance.secret  # unchanged
        return value


@admin.register(NotificationChannel)
class NotificationChannelAdmin(AuditedAdmin):
    form = NotificationChannelForm
    list_display = (
        "name",
        "kind",
        "url_host",
        "min_severity",
        "send_resolved",
        "enabled",
    )
    list_filter = ("kind", "enabled")
    # Robot URLs carry their key (?key=, ?access_token=, /hook/<token>): audit rows keep
    # the host only and say "<field>_changed" for the URL and the secret.
    audit_secret_fields = ("url", "secret")

    # Channels are configuration: the admin role only (model permissions of the role
    # groups cover the console app; this screen asks the role directly).
    def has_module_permission(self, request: HttpRequest) -> bool:
        return has_role(request.user, ROLE_ADMIN)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_role(request.user, ROLE_ADMIN)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return has_role(request.user, ROLE_ADMIN)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_role(request.user, ROLE_ADMIN)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_role(request.user, ROLE_ADMIN)

    @admin.display(description=_("URL"))
    def url_host(self, obj: NotificationChannel) -> str:
        return redacted(obj.url) if obj.url else "—"

    def audit_snapshot(self, obj: Model | None) -> dict[str, Any] | None:
        data = super().audit_snapshot(obj)
        if data is not None and isinstance(obj, NotificationChannel) and obj.url:
            data["url_host"] = redacted(obj.url)
        return data
