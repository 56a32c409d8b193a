"""WebSocket URL routes; each app contributes its own."""

from __future__ import annotations

from django.urls import path

from console.consumers import OperationConsumer
from console.playground.routing import websocket_urlpatterns as playground_ws
from monitoring.routing import websocket_urlpatterns as monitoring_ws

websocket_urlpatterns = [
    path("ws/operations/<int:operation_id>/", OperationConsumer.as_asgi()),
    *monitoring_ws,
    *playground_ws,
]
