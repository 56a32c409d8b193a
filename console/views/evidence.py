"""Evidence bundles: download one as a tar (operator), collect one now (operator)."""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from console.models import Cluster, EvidenceBundle
from console.permissions import role_required
from console.tasks import evidence_collect_task


@require_GET
@role_required("operator")
def evidence_download(request: HttpRequest, pk: int) -> HttpResponse:
    """The bundle as one tar.gz (engine logs may quote request text: operators only)."""
    bundle = get_object_or_404(EvidenceBundle.objects.select_related("cluster"), pk=pk)
    response = HttpResponse(bytes(bundle.archive), content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="{bundle.filename}"'
    response["Content-Length"] = str(len(bundle.archive))
    return response


@require_POST
@role_required("operator")
def evidence_collect_view(request: HttpRequest, name: str) -> HttpResponse:
    """Ask every node of the cluster for its evidence now (a control-worker task)."""

    cluster = get_object_or_404(Cluster, name=name)
    raw = request.POST.get("incident", "").strip()
    incident_id = None
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 2**31:
            return HttpResponseBadRequest(
                _(
                    "incident must be an incident number, e.g. 12; leave it out to collect for the cluster."
                )
            )
        incident_id = int(raw)
    user_id = request.user.pk
    transaction.on_commit(
        lambda: evidence_collect_task.delay(cluster.pk, incident_id, user_id)
    )
    messages.info(
        request,
        _(
            "Collecting evidence from every node of {cluster}; it appears here when done."
        ).format(cluster=cluster.name),
    )
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("cluster-detail", args=[cluster.name])
    return redirect(target)
