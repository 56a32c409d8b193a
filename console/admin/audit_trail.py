"""The audit trail's screen: read-only, because the rows are written by services.

Separate from AuditedAdmin (console/admin/audited.py), which writes rows; this one
only lists them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from console.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the audit trail is written by services, never edited."""

    list_display = (
        "created_at",
        "actor_name",
        "action",
        "target_repr",
        "result",
        "source_ip",
    )
    list_filter = ("result", "action")
    search_fields = ("actor_name", "action", "target_repr", "message")
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
