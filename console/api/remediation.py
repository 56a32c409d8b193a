"""Remediation controls: maintenance mode, failback to HCCS with its evidence, node re-admission."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsOperator, IsViewer
from console.api.serializers import (
    ClusterSerializer,
    OperationSerializer,
)
from console.models import (
    Cluster,
    LinkMode,
    Node,
)
from console.services.node_actions import (
    ActionRefused,
    cluster_failback,
    cluster_maintenance_set,
    hccs_evidence,
    node_readmit,
)
from console.services.operations import (
    OperationConflict,
)


class NodeReadmitResultSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    state = serializers.CharField()
    checks = serializers.ListField(child=serializers.DictField())
    links = serializers.DictField(
        help_text="The failed HCCS links checked again: status recovered / "
        "cannot_verify (accepted with a reason) / none recorded"
    )


class NodeReadmitSerializer(serializers.Serializer[Any]):
    accept_unverified_links = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=300,
        help_text="Why to re-admit although the failed links cannot be checked (audited)",
    )


@extend_schema(
    request=NodeReadmitSerializer,
    responses={200: NodeReadmitResultSerializer, 409: None},
)
@api_view(["POST"])
@permission_classes([IsOperator])
def node_readmit_view(request: Request, name: str) -> Response:
    """Re-admit an out-of-service node as a spare; its preflight runs first (409 with the checks if it fails)."""
    node = get_object_or_404(Node, name=name)
    try:
        body = NodeReadmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = node_readmit(
            node=node,
            user=request.user,
            request=request._request,
            accept_unverified_links=body.validated_data["accept_unverified_links"],
        )
    except ActionRefused as exc:
        return Response(
            {"detail": str(exc), "checks": exc.checks}, status=status.HTTP_409_CONFLICT
        )
    return Response(result)


class MaintenanceSerializer(serializers.Serializer[Any]):
    maintenance_mode = serializers.BooleanField()
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=300
    )


@extend_schema(request=MaintenanceSerializer, responses={200: ClusterSerializer})
@api_view(["POST"])
@permission_classes([IsOperator])
def cluster_maintenance_view(request: Request, name: str) -> Response:
    """Switch maintenance mode on or off (on pauses every automatic remediation of the cluster)."""
    cluster = get_object_or_404(Cluster, name=name)
    ser = MaintenanceSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    cluster = cluster_maintenance_set(
        cluster=cluster,
        on=ser.validated_data["maintenance_mode"],
        user=request.user,
        reason=ser.validated_data["reason"],
        request=request._request,
    )
    return Response(ClusterSerializer(cluster).data)


class FailbackSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=500
    )


class HccsEvidenceSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    link_mode = serializers.CharField()
    since = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()
    hccs_loss_pct = serializers.FloatField(allow_null=True)
    sampled_at = serializers.DateTimeField(allow_null=True)
    unhealthy_links = serializers.ListField(child=serializers.CharField())


class FailbackEvidenceSerializer(serializers.Serializer[Any]):
    nodes = HccsEvidenceSerializer(many=True)


@extend_schema(
    request=FailbackSerializer,
    responses={201: OperationSerializer, 200: FailbackEvidenceSerializer, 409: None},
)
@api_view(["GET", "POST"])
@permission_classes([IsViewer])
def cluster_failback_view(request: Request, name: str) -> Response:
    """GET: the HCCS evidence of every node on RoCE. POST (operator): fail them back to HCCS (a failover operation)."""
    cluster = get_object_or_404(Cluster, name=name)
    if request.method == "GET":
        nodes = cluster.nodes.filter(link_mode=LinkMode.ROCE).order_by("rank")
        return Response({"nodes": [hccs_evidence(n) for n in nodes]})
    if not IsOperator().has_permission(request, None):
        return Response(
            {"detail": IsOperator.message}, status=status.HTTP_403_FORBIDDEN
        )
    ser = FailbackSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    try:
        op = cluster_failback(
            cluster=cluster,
            user=request.user,
            reason=ser.validated_data["reason"],
            request=request._request,
            source="api",
        )
    except ActionRefused as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    except OperationConflict as exc:
        return Response(
            {"detail": str(exc), "running_operation": exc.running.pk},
            status=status.HTTP_409_CONFLICT,
        )
    return Response(OperationSerializer(op).data, status=status.HTTP_201_CREATED)
