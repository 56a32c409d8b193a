"""REST API of alerting: alerts (list, ack), silences, alert rules. Thin: serializers validate, services write."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsAdmin, IsOperator, IsViewer
from console.models import Cluster
from monitoring import telemetry_api
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.incidents import (
    incident_list,
    incident_stats,
    incident_timeline,
    incident_to_dict,
)
from monitoring.alerts.selectors import alert_list
from monitoring.alerts.services import (
    alert_acknowledge,
    alert_to_dict,
    rule_delete,
    rule_save,
    silence_create,
)
from monitoring.models import (
    Alert,
    AlertRule,
    AlertState,
    Incident,
    IncidentState,
    RemediationAction,
    Severity,
)
from monitoring.remediation import RemediationRefused, incident_approve, incident_reject


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


NUMBER_ERRORS = {"invalid": "must be a number, for example 85 or 0.5"}


class AlertRuleSerializer(serializers.ModelSerializer[AlertRule]):
    threshold = serializers.FloatField(error_messages=NUMBER_ERRORS)
    resolve_threshold = serializers.FloatField(
        required=False, allow_null=True, error_messages=NUMBER_ERRORS
    )
    cluster = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Cluster.objects.all(),
        required=False,
        allow_null=True,
    )

    class Meta:
        model = AlertRule
        fields = ["id", *AlertRule.EDITABLE_FIELDS, "scope"]
        read_only_fields = ["id", "scope"]

    def validate_metric(self, value: str) -> str:
        if value not in METRICS:
            raise serializers.ValidationError(
                f"unknown metric {value!r}; use one of: {', '.join(sorted(METRICS))}"
            )
        return value

    def validate_labels(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict) or not all(
            isinstance(v, str | int | float) for v in value.values()
        ):
            raise serializers.ValidationError(
                'labels must be an object of strings, e.g. {"team": "ops"}'
            )
        return {str(k): str(v) for k, v in value.items()}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        inst = self.instance
        comparison = attrs.get("comparison", inst.comparison if inst else "gt")
        threshold = attrs.get("threshold", inst.threshold if inst else None)
        resolve = attrs.get(
            "resolve_threshold", inst.resolve_threshold if inst else None
        )
        if resolve is not None and threshold is not None:
            # Hysteresis must sit on the good side of the threshold, or the alert would flap.
            if comparison in ("gt", "ge") and resolve > threshold:
                raise serializers.ValidationError(
                    {
                        "resolve_threshold": f"must be ≤ threshold ({threshold:g}) for a '>' rule"
                    }
                )
            if comparison in ("lt", "le") and resolve < threshold:
                raise serializers.ValidationError(
                    {
                        "resolve_threshold": f"must be ≥ threshold ({threshold:g}) for a '<' rule"
                    }
                )
        return attrs


class SilenceSerializer(serializers.Serializer[Any]):
    rule = serializers.PrimaryKeyRelatedField(
        queryset=AlertRule.objects.all(), required=False, allow_null=True
    )
    target = serializers.CharField(required=False, allow_blank=True, default="")
    cluster = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Cluster.objects.all(),
        required=False,
        allow_null=True,
    )
    matchers = serializers.DictField(
        child=serializers.CharField(), required=False, default=dict
    )
    ends_at = serializers.DateTimeField()
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=300
    )


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


@extend_schema(request=SilenceSerializer, responses={201: SilenceSerializer})
@api_view(["POST"])
@permission_classes([IsOperator])
def silences(request: Request) -> Response:
    """Silence matching alerts until ``ends_at`` (give a rule id, a target, a cluster or label matchers)."""
    ser = SilenceSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    data = ser.validated_data
    try:
        silence = silence_create(
            user=request.user,
            ends_at=data["ends_at"],
            rule=data.get("rule"),
            target=data["target"],
            cluster_id=data["cluster"].pk if data.get("cluster") else None,
            matchers=data["matchers"],
            comment=data["comment"],
            request=request,
        )
    except ValueError as exc:
        field = "ends_at" if "ends_at" in str(exc) else "non_field_errors"
        return Response({field: [str(exc)]}, status=400)
    return Response({"id": silence.pk, "ends_at": silence.ends_at}, status=201)


def _rule_response(rule: AlertRule, code: int = 200) -> Response:
    return Response(AlertRuleSerializer(rule).data, status=code)


@extend_schema(
    request=AlertRuleSerializer,
    responses={200: AlertRuleSerializer(many=True), 201: AlertRuleSerializer},
)
@api_view(["GET", "POST"])
@permission_classes([IsViewer])
def alert_rules(request: Request) -> Response:
    """List rules (viewer) or create one (admin)."""
    if request.method == "GET":
        return Response(
            AlertRuleSerializer(
                AlertRule.objects.select_related("cluster"), many=True
            ).data
        )
    if not IsAdmin().has_permission(request, None):
        return Response({"detail": IsAdmin.message}, status=403)
    ser = AlertRuleSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    return _rule_response(
        rule_save(
            rule=None, data=ser.validated_data, user=request.user, request=request
        ),
        201,
    )


@extend_schema(
    request=AlertRuleSerializer, responses={200: AlertRuleSerializer, 204: None}
)
@api_view(["GET", "PATCH", "DELETE"])
@permission_classes([IsViewer])
def alert_rule_detail(request: Request, pk: int) -> Response:
    """Read (viewer), change or delete (admin) one rule."""
    rule = get_object_or_404(AlertRule, pk=pk)
    if request.method == "GET":
        return _rule_response(rule)
    if not IsAdmin().has_permission(request, None):
        return Response({"detail": IsAdmin.message}, status=403)
    if request.method == "DELETE":
        rule_delete(rule=rule, user=request.user, request=request)
        return Response(status=204)
    ser = AlertRuleSerializer(rule, data=request.data, partial=True)
    ser.is_valid(raise_exception=True)
    return _rule_response(
        rule_save(
            rule=rule, data=ser.validated_data, user=request.user, request=request
        )
    )


class IncidentSerializer(serializers.Serializer[Incident]):
    """Read-only view of an incident (``incident_to_dict``); times in seconds."""

    id = serializers.IntegerField()
    alert = serializers.IntegerField()
    rule = serializers.CharField()
    target = serializers.CharField()
    cluster = serializers.CharField(allow_null=True)
    node = serializers.CharField(allow_null=True)
    action = serializers.ChoiceField(choices=RemediationAction.choices)
    policy = serializers.CharField()
    state = serializers.ChoiceField(choices=IncidentState.choices)
    summary = serializers.CharField()
    attempts = serializers.IntegerField()
    operations = serializers.ListField(child=serializers.IntegerField())
    verification = serializers.DictField()
    fault_onset_at = serializers.DateTimeField()
    detected_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    operation_started_at = serializers.DateTimeField(allow_null=True)
    healthy_at = serializers.DateTimeField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    approved_by = serializers.CharField(allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    detection_s = serializers.FloatField()
    decision_s = serializers.FloatField(allow_null=True)
    mttr_s = serializers.FloatField(allow_null=True)


class IncidentDetailSerializer(IncidentSerializer):
    timeline = serializers.ListField(child=serializers.DictField())


def _incident(pk: int) -> Incident:
    return get_object_or_404(
        Incident.objects.select_related(
            "alert__rule", "cluster", "node", "approved_by"
        ),
        pk=pk,
    )


def _incident_detail(incident: Incident) -> dict[str, Any]:
    timeline = [
        {**row, "at": row["at"].isoformat()} for row in incident_timeline(incident)
    ]
    return {**incident_to_dict(incident), "timeline": timeline}


@extend_schema(
    parameters=[
        OpenApiParameter("state", str, enum=IncidentState.values),
        OpenApiParameter("action", str, enum=RemediationAction.values),
        OpenApiParameter("cluster", str),
    ],
    responses=IncidentSerializer(many=True),
)
@api_view(["GET"])
@permission_classes([IsViewer])
def incidents(request: Request) -> Response:
    """Incidents newest first (at most 500), filtered by state, action and cluster name."""
    state = request.query_params.get("state") or ""
    action = request.query_params.get("action") or ""
    if state and state not in IncidentState.values:
        return Response(
            {"state": [f"unknown state; use {', '.join(IncidentState.values)}"]},
            status=400,
        )
    if action and action not in RemediationAction.values:
        return Response(
            {"action": [f"unknown action; use {', '.join(RemediationAction.values)}"]},
            status=400,
        )
    qs = incident_list(
        cluster=request.query_params.get("cluster") or "", state=state, action=action
    )
    return Response([incident_to_dict(i) for i in qs[:500]])


class TimeStatsSerializer(serializers.Serializer[Any]):
    n = serializers.IntegerField()
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    histogram = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="counts per bucket of buckets_s, then one for longer",
    )


class IncidentStatsSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    buckets_s = serializers.ListField(child=serializers.IntegerField())
    manual_reference_s = serializers.IntegerField()
    detection = TimeStatsSerializer()
    decision = TimeStatsSerializer()
    mttr = TimeStatsSerializer()


@extend_schema(
    parameters=[OpenApiParameter("cluster", str)],
    responses=IncidentStatsSerializer,
)
@api_view(["GET"])
@permission_classes([IsViewer])
def incidents_stats(request: Request) -> Response:
    """Detection, decision and recovery time (p50 / p95, histogram) over the last 1000 incidents that acted."""
    qs = incident_list(cluster=request.query_params.get("cluster") or "").exclude(
        state__in=(IncidentState.SKIPPED, IncidentState.REJECTED)
    )
    return Response(incident_stats(qs[:1000]))


@extend_schema(responses=IncidentDetailSerializer)
@api_view(["GET"])
@permission_classes([IsViewer])
def incident_detail(request: Request, pk: int) -> Response:
    """One incident with its timeline (milestones and every decision, oldest first)."""
    return Response(_incident_detail(_incident(pk)))


@extend_schema(request=None, responses={200: IncidentDetailSerializer, 409: None})
@api_view(["POST"])
@permission_classes([IsOperator])
def incident_approve_view(request: Request, pk: int) -> Response:
    """Approve an incident awaiting approval: guardrails are checked again, then it acts (409 with the reason if not)."""
    incident = _incident(pk)
    try:
        incident_approve(incident=incident, user=request.user)
    except RemediationRefused as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return Response(_incident_detail(_incident(pk)))


@extend_schema(request=None, responses={200: IncidentDetailSerializer, 409: None})
@api_view(["POST"])
@permission_classes([IsOperator])
def incident_reject_view(request: Request, pk: int) -> Response:
    """Decline an incident awaiting approval (the alert stays; 409 if it is not awaiting approval)."""
    incident = _incident(pk)
    try:
        incident_reject(incident=incident, user=request.user)
    except RemediationRefused as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return Response(_incident_detail(_incident(pk)))


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
