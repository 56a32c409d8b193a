"""Cluster overview and liveness."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console import selectors
from console.permissions import role_required
from console.services.health import redis_ping

log = logging.getLogger("console.health")


@role_required("viewer")
def overview(request: HttpRequest) -> HttpResponse:
    """Every cluster with its nodes in rank order, and the idle spares."""
    return render(
        request,
        "console/overview.html",
        {"clusters": selectors.cluster_list(), "spares": selectors.spare_list()},
    )


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: 200 when the database and Redis answer, 503 otherwise.

    No auth, so the answer is only ok/false per component: the error text (hosts,
    ports, database names) goes to the log for the on-call, not to anonymous callers.
    """
    checks: dict[str, dict[str, bool]] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True}
    except Exception as exc:  # any driver error means "down"
        log.warning("healthz: the database does not answer: %s", exc)
        checks["database"] = {"ok": False}
    ok, error = redis_ping()
    if not ok:
        log.warning("healthz: Redis does not answer: %s", error)
    checks["redis"] = {"ok": ok}
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks},
        status=200 if healthy else 503,
    )
