"""REST API of alerts: the list (filtered by state, severity and cluster) and acknowledging one.

Separate from silences and rules: these read and act on alerts that already exist.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsOperator, IsViewer
from monitoring.alerts.selectors import alert_list
from monitoring.alerts.services import alert_acknowledge, alert_to_dict
from monitoring.models import Alert, AlertState, Severity


class AlertSerializer(serializers.Serializer[Alert]):
    """Read-only view of an alert (``alert_to_dict``)."""

    id = serializers.IntegerField()
    rule = serializers.CharField()
    metric = serializers.CharField()
    target = serializers.CharField()
    cluster = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(choices=AlertState.choices)
    severity = serializers.ChoiceField(choices=Severity.choices)
    value = serializers.FloatField(allow_null=True)
    peak_value = serializers.FloatField(allow_null=True)  # worst value while open
    message = serializers.CharField()
    silenced = serializers.BooleanField()
    fault_onset_at = serializers.DateTimeField()
    fired_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)


@extend_schema(
    parameters=[
        OpenApiParameter("state", str, enum=["active", *AlertState.values]),
        OpenApiParameter("severity", str, enum=Severity.values),
        OpenApiParameter("cluster", str),
    ],
    responses=AlertSerializer(many=True),
)
@api_view(["GET"])
@permission_classes([IsViewer])
def alerts(request: Request) -> Response:
    """Alerts newest first (at most 500), filtered by state, severity and cluster name."""
    state = request.query_params.get("state") or None
    severity = request.query_params.get("severity") or None
    if state and state not in ("active", *AlertState.values):
        return Response(
            {"state": [f"unknown state; use active, {', '.join(AlertState.values)}"]},
            status=400,
        )
    if severity and severity not in Severity.values:
        return Response(
            {"severity": [f"unknown severity; use {', '.join(Severity.values)}"]},
            status=400,
        )
    qs: QuerySet[Alert] = alert_list(
        state=state, severity=severity, cluster=request.query_params.get("cluster")
    )
    return Response([alert_to_dict(a) for a in qs[:500]])


@extend_schema(request=None, responses={200: AlertSerializer, 409: None})
@api_view(["POST"])
@permission_classes([IsOperator])
def alert_ack(request: Request, pk: int) -> Response:
    """Acknowledge a firing alert (409 if it is not firing)."""
    alert = get_object_or_404(Alert.objects.select_related("rule", "cluster"), pk=pk)
    try:
        alert = alert_acknowledge(alert=alert, user=request.user, request=request)
    except ValueError as exc:
        return Response({"state": [str(exc)]}, status=status.HTTP_409_CONFLICT)
    return Response(alert_to_dict(alert))
