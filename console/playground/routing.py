from __future__ import annotations

from django.urls import path

from console.playground.consumer import PlaygroundConsumer

websocket_urlpatterns = [path("ws/playground/", PlaygroundConsumer.as_asgi())]
