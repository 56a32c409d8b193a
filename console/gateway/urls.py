"""``/v1/...`` routes (included from console.urls)."""

from __future__ import annotations

from django.urls import path

from console.gateway import views

urlpatterns = [
    path("models", views.models, name="gateway-models"),
    path("chat/completions", views.chat_completions, name="gateway-chat"),
    path("completions", views.completions, name="gateway-completions"),
    path("messages", views.messages, name="gateway-messages"),
    path("messages/count_tokens", views.count_tokens, name="gateway-count-tokens"),
]
