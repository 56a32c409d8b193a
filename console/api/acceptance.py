"""Acceptance API: the correctness gate on demand, and benchmark results."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsOperator, IsViewer
from console.models import BenchmarkRun, Cluster, ClusterState, GateRun
from console.models.operations import ACTIVE_STATES
from console.services.acceptance import acceptance_gate
from console.services.benchmarks import benchmark_import, run_to_dict
from engine.bench import ResultInvalid


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


@extend_schema(
    methods=["GET"],
    responses=GateRunSerializer(many=True),
    operation_id="clusters_gate_list",
)
@extend_schema(
    methods=["POST"],
    request=None,
    responses={201: GateRunSerializer},
    operation_id="clusters_gate_run",
)
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
    running = cluster.operations.filter(state__in=ACTIVE_STATES).first()
    if running is not None:  # a start/restart runs its own gate; do not race it
        return Response(
            {
                "detail": f"operation #{running.pk} ({running.kind}) is running on "
                f"{cluster.name}; run the gate when it has finished",
                "running_operation": running.pk,
            },
            status=status.HTTP_409_CONFLICT,
        )
    result = acceptance_gate(
        cluster, trigger="manual", actor=request.user, request=request._request
    )
    assert result.run is not None  # manual runs always ask
    return Response(GateRunSerializer(result.run).data, status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["GET"], responses=OpenApiTypes.OBJECT, operation_id="benchmarks_list"
)
@extend_schema(
    methods=["POST"],
    request=OpenApiTypes.OBJECT,  # a `vllm bench serve --save-result` JSON
    responses={201: OpenApiTypes.OBJECT},
    operation_id="benchmarks_import",
)
@api_view(["GET", "POST"])
@permission_classes([IsViewer])
def benchmark_list(request: Request) -> Response:
    """GET: results newest first (``?cluster=NAME`` filters). POST (operator): import a
    ``vllm bench serve --save-result`` JSON body, ``?cluster=NAME`` the cluster it ran against."""
    if request.method == "POST":
        return _benchmark_import(request)
    runs = BenchmarkRun.objects.select_related("cluster")
    if request.query_params.get("cluster"):
        runs = runs.filter(cluster__name=request.query_params["cluster"])
    return Response([run_to_dict(r) for r in runs[:200]])


@extend_schema(responses=OpenApiTypes.OBJECT, operation_id="benchmarks_detail")
@api_view(["GET"])
@permission_classes([IsViewer])
def benchmark_detail(request: Request, pk: int) -> Response:
    """One benchmark result with every vLLM figure and its pass/fail against the profile's targets."""
    run = get_object_or_404(BenchmarkRun.objects.select_related("cluster"), pk=pk)
    data: dict[str, Any] = run_to_dict(run, full=True)
    return Response(data)


def _benchmark_import(request: Request) -> Response:
    if not IsOperator().has_permission(request, None):
        return Response(
            {"detail": IsOperator.message}, status=status.HTTP_403_FORBIDDEN
        )
    cluster = None
    name = request.query_params.get("cluster")
    if name:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            return Response(
                {
                    "cluster": [
                        f"cluster {name!r} does not exist; see GET /api/clusters/"
                    ]
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
    try:
        run = benchmark_import(request.data, cluster=cluster, actor=request.user)
    except ResultInvalid as exc:
        return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
    return Response(run_to_dict(run, full=True), status=status.HTTP_201_CREATED)
