"""``/v1/...`` routes in Django's URL conf (included from console.urls).

In production console.asgi sends /v1/ to the gateway's own ASGI app before Django
sees it; these routes serve the same handlers to Django's test client and to any
server that runs the plain Django application.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from console.gateway.http import Request, StreamResponse
from console.gateway.upstream import upstream_close
from console.gateway.views import dispatch


async def _then_close(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await upstream_close()


@csrf_exempt
async def gateway_view(request: HttpRequest) -> HttpResponseBase:
    req = Request(
        request.method or "GET",
        request.path,
        {k.lower(): v for k, v in request.headers.items()},
        request.body,
    )
    # Django runs this view on an event loop of its own per request: the engine
    # connections go with it.
    response = await dispatch(req)
    if isinstance(response, StreamResponse):
        out: HttpResponseBase = StreamingHttpResponse(
            _then_close(response.chunks),
            content_type=response.content_type,
            status=response.status,
        )
    else:
        await upstream_close()
        out = HttpResponse(
            response.body, content_type=response.content_type, status=response.status
        )
    for name, value in response.headers.items():
        out[name] = value
    return out


urlpatterns = [
    path("models", gateway_view, name="gateway-models"),
    path("chat/completions", gateway_view, name="gateway-chat"),
    path("completions", gateway_view, name="gateway-completions"),
    path("messages", gateway_view, name="gateway-messages"),
    path("messages/count_tokens", gateway_view, name="gateway-count-tokens"),
]
