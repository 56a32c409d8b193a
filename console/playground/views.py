"""The playground page (operators): the chat itself runs over ``/ws/playground/``."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.permissions import role_required
from console.playground.services import playground_clusters

log = logging.getLogger("console.playground")


@role_required("operator")
def playground(request: HttpRequest) -> HttpResponse:
    log.info("playground: opened by %s", request.user.get_username())
    clusters = playground_clusters()
    return render(
        request,
        "console/playground.html",
        {
            "clusters": clusters,
            "gateway_base": request.build_absolute_uri("/v1"),
        },
    )
