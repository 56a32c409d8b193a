"""REST API of silences: create one that mutes matching alerts until it ends.

Its own resource: a silence is written by ``silence_create`` and matches alerts by rule,
target, cluster or labels, without touching them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsOperator
from console.models import Cluster
from monitoring.alerts.services import silence_create
from monitoring.models import AlertRule


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
