"""``/metrics`` for Prometheus: a bearer token (METRICS_TOKEN) unless METRICS_PUBLIC=true."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

# 0.0.4 is what generate_latest() writes and what every Prometheus 2.x and 3.x accepts.
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from monitoring.exporter import exposition


def _allowed(request: HttpRequest) -> tuple[bool, int, str]:
    if settings.METRICS_PUBLIC:
        return True, 200, ""
    token = settings.METRICS_TOKEN
    if not token:
        return (
            False,
            403,
            "/metrics is disabled: set METRICS_TOKEN (then send 'Authorization: Bearer <token>') or METRICS_PUBLIC=true.\n",
        )
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        return False, 401, "/metrics needs 'Authorization: Bearer <METRICS_TOKEN>'.\n"
    return True, 200, ""


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The latest NPU/link values and the console's own metrics in Prometheus text format."""
    ok, status, message = _allowed(request)
    if not ok:
        response = HttpResponse(
            message, status=status, content_type="text/plain; charset=utf-8"
        )
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_PLAIN_0_0_4)
