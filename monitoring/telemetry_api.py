"""Telemetry API (/api/...): the latest sample per node of a cluster, and chart windows (downsampled)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsViewer
from console.models import (
    Cluster,
    Node,
)
from monitoring.selectors import RAW_MAX_S, dashboard_nodes, engine_series, node_series


def _node_latest_row(row: dict[str, Any]) -> dict[str, Any]:
    node = row["node"]
    return {
        "node": node.name,
        "rank": node.rank,
        "state": node.state,
        "ts": row["ts"],
        "stale": row["stale"],
        "hccs_loss_pct": row["hccs_loss_pct"],
        "errors_15m": row["errors_15m"],
        "engine": row["engine"],
        "chips": row["chips"],
    }


@extend_schema(responses={200: OpenApiTypes.OBJECT})
@api_view(["GET"])
@permission_classes([IsViewer])
def telemetry_latest(request: Request, name: str) -> Response:
    """Latest sample per member node (chips, engine, HCCS loss, staleness)."""
    cluster = get_object_or_404(Cluster, name=name)
    rows = [_node_latest_row(r) for r in dashboard_nodes(cluster)]
    return Response({"cluster": cluster.name, "state": cluster.state, "nodes": rows})


class TelemetryRangeQuery(serializers.Serializer):
    node = serializers.SlugRelatedField(slug_field="name", queryset=Node.objects.all())
    series = serializers.ChoiceField(choices=["node", "engine"], default="node")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end = attrs.get("end") or timezone.now()
        if attrs["start"] >= end:
            raise serializers.ValidationError({"start": ["start must be before end."]})
        if attrs["series"] == "engine" and attrs["node"].cluster_id is None:
            raise serializers.ValidationError(
                {"node": ["This node is in no cluster: it has no engine series."]}
            )
        attrs["end"] = end
        return attrs


def _clip(data: dict[str, Any], end: float) -> dict[str, Any]:
    """Drop points after ``end`` from a {t: [...], col: [...] | [[...], ...]} series."""
    keep = sum(1 for t in data["t"] if t <= end)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "chips" or not isinstance(value, list):
            out[key] = value
        elif value and isinstance(value[0], list):
            out[key] = [col[:keep] for col in value]
        else:
            out[key] = value[:keep]
    return out


@extend_schema(parameters=[TelemetryRangeQuery], responses={200: OpenApiTypes.OBJECT})
@api_view(["GET"])
@permission_classes([IsViewer])
def telemetry_range(request: Request) -> Response:
    """One node's chip/HCCS series or its cluster's engine series, downsampled."""
    query = TelemetryRangeQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    node: Node = query.validated_data["node"]
    start, end = query.validated_data["start"], query.validated_data["end"]
    use_rollups = (timezone.now() - start).total_seconds() > RAW_MAX_S
    if query.validated_data["series"] == "engine" and node.cluster is not None:
        data = engine_series(node.cluster, start, use_rollups=use_rollups)
    else:
        data = node_series(node, start, use_rollups=use_rollups)
    return Response(
        {
            "node": node.name,
            "series": query.validated_data["series"],
            "source": "rollup" if use_rollups else "raw",
            **_clip(data, end.timestamp()),
        }
    )
