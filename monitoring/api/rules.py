"""REST API of alert rules: list and create, read, change and delete one (changes: admin only).

The serializer holds the rule's field checks (known metric, labels, hysteresis on the
good side of the threshold); ``rule_save`` and ``rule_delete`` write.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsAdmin, IsViewer
from console.models import Cluster
from monitoring.alerts.catalog import METRICS
from monitoring.alerts.services import rule_delete, rule_save
from monitoring.models import AlertRule

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
