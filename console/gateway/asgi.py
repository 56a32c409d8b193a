"""An ASGI handler for ``/v1/`` alone: Django's URL routing and views without the
browser middleware.

The browser stack (sessions, CSRF, login redirect, WhiteNoise) includes sync-only
middleware, and one sync middleware makes Django run every request through a
thread hop that serializes concurrent requests until the view returns. Gateway
requests carry an API key and need none of that stack, so they skip it and stay on
the event loop.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response


class GatewayASGIHandler(ASGIHandler):
    """ASGIHandler with an empty middleware chain (each gateway view authenticates by
    API key)."""

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)  # type: ignore[attr-defined]


GATEWAY_PREFIX = "/v1/"
