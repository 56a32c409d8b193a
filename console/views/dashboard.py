"""Cluster overview and liveness."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console import selectors
from console.permissions import role_required
from console.services.health import redis_ping


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
    """Liveness for load balancers: 200 when the database and Redis answer, 503 otherwise. No auth."""
    checks: dict[str, dict[str, object]] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "vendor": connection.vendor}
    except (
        Exception
    ) as exc:  # any driver error means "down"; the message helps the on-call
        checks["database"] = {"ok": False, "error": str(exc)[:200]}
    ok, error = redis_ping()
    checks["redis"] = {"ok": ok} if ok else {"ok": False, "error": error}
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks},
        status=200 if healthy else 503,
    )
