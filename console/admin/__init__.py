"""Admin screens for the inventory and for users/groups; every save and delete is audited.

A package by sub-domain: the audited base (audited.py), the engine profile screen
(profiles.py), clusters and nodes (inventory.py), the read-only audit trail
(audit_trail.py), users and groups (accounts.py) and API tokens (tokens.py). The
submodules register their screens on import, in this order.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

# isort: off
# The order is the order of registration (admin.site._registry keeps it): profiles,
# inventory and the audit trail first, then users/groups and tokens re-registered.
from console.admin.audited import AuditedAdmin, audit_snapshot
from console.admin.profiles import EngineProfileAdmin, EngineProfileForm
from console.admin.inventory import ClusterAdmin, NodeAdmin, NodeInline
from console.admin.audit_trail import AuditEventAdmin
from console.admin.accounts import AuditedGroupAdmin, AuditedUserAdmin
from console.admin.tokens import AuditedTokenAdmin

# isort: on

__all__ = [
    "AuditEventAdmin",
    "AuditedAdmin",
    "AuditedGroupAdmin",
    "AuditedTokenAdmin",
    "AuditedUserAdmin",
    "ClusterAdmin",
    "EngineProfileAdmin",
    "EngineProfileForm",
    "NodeAdmin",
    "NodeInline",
    "audit_snapshot",
]

admin.site.site_header = _("Ascend vLLM Ops Console administration")
admin.site.site_title = _("Ascend vLLM Ops Console")
