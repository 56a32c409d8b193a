"""Admin screens for the inventory; every save and delete is audited."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from console.models import AuditEvent, Cluster, EngineProfile, Node
from console.services.audit import audit_record, snapshot

admin.site.site_header = _("Ascend vLLM Ops Console administration")
admin.site.site_title = _("Ascend vLLM Ops Console")


class AuditedAdmin(admin.ModelAdmin):
    """Writes an AuditEvent (with before/after) for every change made through the admin."""

    def save_model(
        self, request: HttpRequest, obj: Model, form: Any, change: bool
    ) -> None:
        before = (
            snapshot(type(obj)._default_manager.filter(pk=obj.pk).first())
            if change and obj.pk
            else None
        )
        super().save_model(request, obj, form, change)
        action = f"{obj._meta.model_name}.{'update' if change else 'create'}"
        audit_record(
            action=action,
            request=request,
            target=obj,
            before=before,
            after=snapshot(obj),
        )

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        before, label = snapshot(obj), str(obj)
        super().delete_model(request, obj)
        audit_record(
            action=f"{obj._meta.model_name}.delete",
            request=request,
            target_repr=label,
            before=before,
        )

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


class NodeInline(admin.TabularInline):
    model = Node
    fields = ("name", "rank", "role", "management_ip", "api_port", "link_mode", "state")
    readonly_fields = ("state",)
    extra = 0
    show_change_link = True


@admin.register(EngineProfile)
class EngineProfileAdmin(AuditedAdmin):
    list_display = (
        "name",
        "served_model_name",
        "vllm_version",
        "data_parallel_size",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "quantization",
    )
    search_fields = ("name", "served_model_name", "model_path")


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ("name", "profile", "state", "maintenance_mode")
    list_filter = ("state",)
    inlines = [NodeInline]


@admin.register(Node)
class NodeAdmin(AuditedAdmin):
    list_display = (
        "name",
        "cluster",
        "rank",
        "role",
        "management_ip",
        "api_port",
        "driver",
        "link_mode",
        "state",
    )
    list_filter = ("cluster", "role", "state", "link_mode", "driver")
    search_fields = ("name", "hostname", "management_ip")


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
