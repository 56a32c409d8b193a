"""Read queries for evidence bundles (the archive column is deferred: it can be megabytes)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q, QuerySet

from console.models import Cluster, EvidenceBundle


def evidence_list(
    *,
    cluster: Cluster | None = None,
    incident_id: int | None = None,
    operation_ids: Iterable[int] = (),
    limit: int = 5,
) -> list[EvidenceBundle]:
    """Newest first: a cluster's bundles, or those of an incident (by id or by its operations)."""
    qs: QuerySet[EvidenceBundle] = EvidenceBundle.objects.defer(
        "archive"
    ).select_related("cluster", "operation")
    if incident_id is not None:
        ids = [int(i) for i in operation_ids]
        qs = qs.filter(Q(incident_id=incident_id) | Q(operation_id__in=ids))
    elif cluster is not None:
        qs = qs.filter(cluster=cluster)
    else:
        return []
    return list(qs[:limit])
