"""Acceptance API: the correctness gate on demand, and benchmark results."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsOperator, IsViewer
from console.models import BenchmarkRun, Cluster, ClusterState, GateRun
from console.services.acceptance import acceptance_gate
from console.services.benchmarks import run_to_dict


class GateRunSerializer(serializers.ModelSerializer[GateRun]):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = GateRun
        fields = [
            "id",
            "cluster",
            "trigger",
            "policy",
            "passed",
            "accuracy",
            "baseline",
            "threshold",
            "reason",
            "samples",
            "started_at",
            "finished_at",
        ]


@extend_schema(responses={200: GateRunSerializer(many=True), 201: GateRunSerializer})
@api_view(["GET", "POST"])
@permission_classes([IsViewer])
def cluster_gate(request: Request, name: str) -> Response:
    """GET: the cluster's gate runs, newest first. POST (operator): run the gate now."""
    cluster = get_object_or_404(Cluster, name=name)
    if request.method == "GET":
        return Response(GateRunSerializer(cluster.gate_runs.all()[:50], many=True).data)
    if not IsOperator().has_permission(request, None):
        return Response(
            {"detail": IsOperator.message}, status=status.HTTP_403_FORBIDDEN
        )
    if cluster.state not in (ClusterState.RUNNING, ClusterState.DEGRADED):
        return Response(
            {
                "cluster": [
                    f"cluster {cluster.name} is {cluster.state}; the gate asks a serving "
                    "engine: start the cluster first"
                ]
            },
            status=status.HTTP_409_CONFLICT,
        )
    result = acceptance_gate(
        cluster, trigger="manual", actor=request.user, request=request._request
    )
    assert result.run is not None  # manual runs always ask
    return Response(GateRunSerializer(result.run).data, status=status.HTTP_201_CREATED)


@api_view(["GET"])
@permission_classes([IsViewer])
def benchmark_list(request: Request) -> Response:
    """Benchmark results newest first; ``?cluster=NAME`` filters."""
    runs = BenchmarkRun.objects.select_related("cluster")
    if request.query_params.get("cluster"):
        runs = runs.filter(cluster__name=request.query_params["cluster"])
    return Response([run_to_dict(r) for r in runs[:200]])


@api_view(["GET"])
@permission_classes([IsViewer])
def benchmark_detail(request: Request, pk: int) -> Response:
    """One benchmark result with every vLLM figure and its pass/fail against the profile's targets."""
    run = get_object_or_404(BenchmarkRun.objects.select_related("cluster"), pk=pk)
    data: dict[str, Any] = run_to_dict(run, full=True)
    return Response(data)
