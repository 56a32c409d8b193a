from __future__ import annotations

from django.urls import path

from console.playground import views

urlpatterns = [path("", views.playground, name="playground")]
