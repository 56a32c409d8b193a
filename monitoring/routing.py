from __future__ import annotations

from django.urls import path

from monitoring import consumers
from monitoring.alerts.consumers import AlertsConsumer

websocket_urlpatterns = [
    path("ws/clusters/<int:cluster_id>/", consumers.ClusterConsumer.as_asgi()),
    path("ws/alerts/", AlertsConsumer.as_asgi()),
]
