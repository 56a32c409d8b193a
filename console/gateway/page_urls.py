"""``/apikeys/...``: the admin page for gateway keys (included from console.urls)."""

from __future__ import annotations

from django.urls import path

from console.gateway import pages

urlpatterns = [
    path("", pages.apikey_list, name="apikey-list"),
    path("create/", pages.apikey_create_view, name="apikey-create"),
    path("<int:pk>/revoke/", pages.apikey_revoke_view, name="apikey-revoke"),
    path("policy/", pages.apikey_policy_view, name="apikey-policy"),
]
