"""REST API of alerting: alerts (list, ack), silences, alert rules, incidents; telemetry reads.

Thin: serializers validate, services write. One module per resource; this one holds the
URL table (``include("monitoring.api")`` in console/urls.py) and re-exports every view and
serializer under its old name.
"""

from __future__ import annotations

from django.urls import path

from monitoring import telemetry_api
from monitoring.api.alerts import AlertSerializer, alert_ack, alerts
from monitoring.api.incidents import (
    IncidentDetailSerializer,
    IncidentSerializer,
    IncidentStatsSerializer,
    TimeStatsSerializer,
    incident_approve_view,
    incident_detail,
    incident_reject_view,
    incidents,
    incidents_stats,
)
from monitoring.api.rules import (
    NUMBER_ERRORS,
    AlertRuleSerializer,
    alert_rule_detail,
    alert_rules,
)
from monitoring.api.silences import SilenceSerializer, silences

__all__ = [
    "NUMBER_ERRORS",
    "AlertRuleSerializer",
    "AlertSerializer",
    "IncidentDetailSerializer",
    "IncidentSerializer",
    "IncidentStatsSerializer",
    "SilenceSerializer",
    "TimeStatsSerializer",
    "alert_ack",
    "alert_rule_detail",
    "alert_rules",
    "alerts",
    "incident_approve_view",
    "incident_detail",
    "incident_reject_view",
    "incidents",
    "incidents_stats",
    "silences",
    "urlpatterns",
]

urlpatterns = [
    path(
        "clusters/<slug:name>/telemetry/latest/",
        telemetry_api.telemetry_latest,
        name="api-telemetry-latest",
    ),
    path("telemetry/range/", telemetry_api.telemetry_range, name="api-telemetry-range"),
    path("incidents/", incidents, name="api-incidents"),
    path("incidents/stats/", incidents_stats, name="api-incidents-stats"),
    path("incidents/<int:pk>/", incident_detail, name="api-incident-detail"),
    path(
        "incidents/<int:pk>/approve/",
        incident_approve_view,
        name="api-incident-approve",
    ),
    path(
        "incidents/<int:pk>/reject/", incident_reject_view, name="api-incident-reject"
    ),
    path("alerts/", alerts, name="api-alerts"),
    path("alerts/<int:pk>/ack/", alert_ack, name="api-alert-ack"),
    path("silences/", silences, name="api-silences"),
    path("alert-rules/", alert_rules, name="api-alert-rules"),
    path("alert-rules/<int:pk>/", alert_rule_detail, name="api-alert-rule-detail"),
]
