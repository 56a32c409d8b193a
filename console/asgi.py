"""ASGI entry point: Django for HTTP, Channels for WebSockets (``/ws/...``)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from console.gateway.app import (  # noqa: E402
    GATEWAY_PREFIX,
    gateway_app,
    gateway_lifespan,
)
from console.routing import websocket_urlpatterns  # noqa: E402


async def http_app(scope, receive, send):  # type: ignore[no-untyped-def]
    """/v1/ is the API-key gateway's own ASGI app (console.gateway.app); the rest is
    plain Django."""
    app = gateway_app if scope["path"].startswith(GATEWAY_PREFIX) else django_asgi_app
    return await app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        # shutdown writes the gateway's pending usage (console.gateway.app)
        "lifespan": gateway_lifespan,
        # Origin must match ALLOWED_HOSTS (blocks cross-site WebSocket hijacking); the
        # session cookie identifies the user; consumers refuse anonymous users with 4403.
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
