"""REST API of remediation incidents: list, time statistics, one with its timeline, approve and reject.

The incidents automatic remediation opened (``monitoring.remediation``), apart from the
alerts that caused them; approve and reject call its operator decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsOperator, IsViewer
from monitoring.alerts.incidents import (
    incident_list,
    incident_stats,
    incident_timeline,
    incident_to_dict,
)
from monitoring.models import Incident, IncidentState, RemediationAction
from monitoring.remediation import RemediationRefused, incident_approve, incident_reject


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
    return _decide(request, pk, incident_approve)


@extend_schema(request=None, responses={200: IncidentDetailSerializer, 409: None})
@api_view(["POST"])
@permission_classes([IsOperator])
def incident_reject_view(request: Request, pk: int) -> Response:
    """Decline an incident awaiting approval (the alert stays; 409 if it is not awaiting approval)."""
    return _decide(request, pk, incident_reject)


def _decide(request: Request, pk: int, decision: Callable[..., Any]) -> Response:
    """An operator's decision on one incident: its detail after, or 409 with the reason
    remediation refused it."""
    try:
        decision(incident=_incident(pk), user=request.user)
    except RemediationRefused as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return Response(_incident_detail(_incident(pk)))
