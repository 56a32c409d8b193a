"""``{% evidence_panel %}``: the evidence bundles and cross-node findings of an incident or a cluster.

Include it on a page with ``{% load evidence %}{% evidence_panel incident=incident %}`` or
``{% evidence_panel cluster=cluster %}``. Everyone who can see the page sees the
findings (diagnoses carry no secrets); downloading the tar and collecting need the
operator role, because engine logs may quote request text.
"""

from __future__ import annotations

from typing import Any

from django import template

from console.permissions import has_role
from console.selectors_evidence import evidence_list

register = template.Library()


@register.inclusion_tag("console/partials/_evidence.html", takes_context=True)
def evidence_panel(
    context: dict[str, Any], *, incident: Any = None, cluster: Any = None
) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    operator = user is not None and has_role(user, "operator")
    if incident is not None:
        bundles = evidence_list(
            incident_id=incident.pk, operation_ids=incident.operation_ids or []
        )
        target = incident.cluster
    else:
        bundles = evidence_list(cluster=cluster)
        target = cluster
    return {
        "bundles": bundles,
        "cluster": target,
        "incident": incident,
        "can_download": operator,
        "can_collect": operator and target is not None,
        "request": request,
        "csrf_token": context.get("csrf_token"),
    }
