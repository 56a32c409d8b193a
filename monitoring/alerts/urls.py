from __future__ import annotations

from django.urls import path

from monitoring.alerts import views

urlpatterns = [
    path("alerts/", views.alerts_page, name="alerts"),
    path("alerts/<int:pk>/", views.alert_detail, name="alert-detail"),
    path("alerts/<int:pk>/ack", views.alert_ack, name="alert-ack"),
    path("alerts/<int:pk>/silence", views.alert_silence, name="alert-silence"),
    path("alerts/incidents/", views.incidents_page, name="incidents"),
    path("alerts/incidents/<int:pk>/", views.incident_detail, name="incident-detail"),
    path(
        "alerts/incidents/<int:pk>/decide",
        views.incident_decide,
        name="incident-decide",
    ),
    path("alerts/rules/", views.rules_page, name="alert-rules"),
    path("alerts/rules/new", views.rule_edit, name="alert-rule-new"),
    path("alerts/rules/preview", views.rule_preview, name="alert-rule-preview"),
    path("alerts/rules/<int:pk>/edit", views.rule_edit, name="alert-rule-edit"),
]
