"""The inventory screens: clusters (with their nodes inline) and nodes, audited.

Separate from the profile screen (its own form) and from the account screens; these
are plain audited lists over console.models.inventory.
"""

from __future__ import annotations

from django.contrib import admin

from console.admin.audited import AuditedAdmin
from console.models import Cluster, Node


class NodeInline(admin.TabularInline):
    model = Node
    fields = ("name", "rank", "role", "management_ip", "api_port", "link_mode", "state")
    readonly_fields = ("state",)
    extra = 0
    show_change_link = True


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
