"""REST admin API views: parse, call a service, render."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, mixins, serializers, status, viewsets
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsAdmin, IsOperator, IsViewer
from console.api.serializers import (
    AuditEventSerializer,
    ClusterSerializer,
    ClusterWriteSerializer,
    EngineProfileSerializer,
    EngineProfileWriteSerializer,
    NodeSerializer,
    NodeWriteSerializer,
    OperationCreateSerializer,
    OperationSerializer,
    TokenSerializer,
)
from console.api.tokens import token_revoke, token_rotate
from console.models import (
    AuditEvent,
    Cluster,
    EngineProfile,
    Node,
    Operation,
    OperationKind,
    OperationState,
)
from console.services import inventory_admin
from console.services.audit import client_ip
from console.services.inventory_admin import InventoryConflict, InventoryInvalid
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_cancel,
    operation_reap_interrupted,
    operation_start,
)


@extend_schema(
    request=OperationCreateSerializer,
    responses={201: OperationSerializer, 200: OperationSerializer(many=True)},
)
@api_view(["GET", "POST"])
@permission_classes([IsViewer])
def cluster_operations(request: Request, name: str) -> Response:
    """GET: the operations, newest first. POST {kind, reason, force}: start one."""
    cluster = get_object_or_404(Cluster, name=name)
    if request.method == "GET":
        ops = cluster.operations.prefetch_related("steps__node")[:50]
        return Response(OperationSerializer(ops, many=True).data)
    if not IsOperator().has_permission(request, None):
        return Response(
            {"detail": IsOperator.message}, status=status.HTTP_403_FORBIDDEN
        )
    serializer = OperationCreateSerializer(
        data=request.data, context={"cluster": cluster}
    )
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    params: dict[str, Any] = {}
    if "warmup_requests" in data:
        params["warmup_requests"] = data["warmup_requests"]
    if data.get("link_modes"):
        params["link_modes"] = data["link_modes"]
    for key in ("node", "spare"):  # replace
        if data.get(key):
            params[key] = data[key]
    if data.get("bench"):
        params["bench"] = data["bench"]
    try:
        op = operation_start(
            cluster=cluster,
            kind=data["kind"],
            user=request.user,
            reason=data["reason"],
            source="api",
            force=data["force"],
            params=params,
            request=request._request,
            source_ip=client_ip(request._request),
        )
    except OperationRefused as exc:
        return Response(
            {exc.field: [str(exc)]},
            status=status.HTTP_400_BAD_REQUEST
            if exc.field != "force"
            else status.HTTP_403_FORBIDDEN,
        )
    except OperationConflict as exc:
        return Response(
            {"detail": str(exc), "running_operation": exc.running.pk},
            status=status.HTTP_409_CONFLICT,
        )
    return Response(OperationSerializer(op).data, status=status.HTTP_201_CREATED)


@extend_schema(responses=OperationSerializer)
@api_view(["GET"])
@permission_classes([IsViewer])
def operation_detail(request: Request, pk: int) -> Response:
    """One operation with its steps."""
    operation_reap_interrupted()  # also when the control worker (and its beat reaper) is down
    op = get_object_or_404(
        Operation.objects.select_related("cluster").prefetch_related("steps__node"),
        pk=pk,
    )
    return Response(OperationSerializer(op).data)


_WRITE_ACTIONS = ("create", "partial_update", "destroy")


class AdminWriteViewSet(
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.ReadOnlyModelViewSet,
):
    """Read for viewers; POST/PATCH/DELETE for admins via an inventory_admin service.

    Subclasses name the services; 400 carries field-keyed reasons (model clean() and
    the launch plan), 409 a state that forbids the write. No PUT: PATCH what changes.
    """

    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    write_serializer_class: type[serializers.Serializer]
    create_service: Any
    update_service: Any
    delete_service: Any = None
    instance_kwarg: str

    def get_permissions(self):  # type: ignore[no-untyped-def]
        return [IsAdmin()] if self.action in _WRITE_ACTIONS else [IsViewer()]

    def _run(self, service: Any, **kwargs: Any) -> Any:
        try:
            return service(
                actor=self.request.user, request=self.request._request, **kwargs
            )
        except InventoryInvalid as exc:
            raise ValidationError(exc.errors) from exc

    def _conflict(self, exc: InventoryConflict) -> Response:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        writer = self.write_serializer_class(data=request.data)
        writer.is_valid(raise_exception=True)
        try:
            obj = self._run(self.create_service, data=dict(writer.validated_data))
        except InventoryConflict as exc:
            return self._conflict(exc)
        return Response(self.get_serializer(obj).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        obj = self.get_object()
        writer = self.write_serializer_class(obj, data=request.data, partial=True)
        writer.is_valid(raise_exception=True)
        try:
            obj = self._run(
                self.update_service,
                changes=dict(writer.validated_data),
                **{self.instance_kwarg: obj},
            )
        except InventoryConflict as exc:
            return self._conflict(exc)
        return Response(self.get_serializer(obj).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        obj = self.get_object()
        try:
            self._run(self.delete_service, **{self.instance_kwarg: obj})
        except InventoryConflict as exc:
            return self._conflict(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _write_schema(read: type, write: type) -> Any:
    return extend_schema_view(
        create=extend_schema(request=write, responses={201: read}),
        partial_update=extend_schema(request=write, responses={200: read, 409: None}),
        destroy=extend_schema(responses={204: None, 409: None}),
    )


@_write_schema(ClusterSerializer, ClusterWriteSerializer)
class ClusterViewSet(AdminWriteViewSet):
    """Clusters with their profile and node names (viewer); writes (admin)."""

    queryset = (
        Cluster.objects.select_related("profile")
        .prefetch_related("nodes")
        .order_by("name")
    )
    serializer_class = ClusterSerializer
    write_serializer_class = ClusterWriteSerializer
    lookup_field = "name"
    instance_kwarg = "cluster"
    create_service = staticmethod(inventory_admin.cluster_create)
    update_service = staticmethod(inventory_admin.cluster_update)
    delete_service = staticmethod(inventory_admin.cluster_delete)


@_write_schema(NodeSerializer, NodeWriteSerializer)
class NodeViewSet(AdminWriteViewSet):
    """Inventory nodes (viewer); writes (admin; 409 while an operation runs)."""

    queryset = Node.objects.select_related("cluster").order_by("name")
    serializer_class = NodeSerializer
    write_serializer_class = NodeWriteSerializer
    lookup_field = "name"
    instance_kwarg = "node"
    create_service = staticmethod(inventory_admin.node_create)
    update_service = staticmethod(inventory_admin.node_update)
    delete_service = staticmethod(inventory_admin.node_delete)


@_write_schema(EngineProfileSerializer, EngineProfileWriteSerializer)
class EngineProfileViewSet(AdminWriteViewSet):
    """Engine profiles (viewer); writes (admin; checked by the launch plan)."""

    queryset = EngineProfile.objects.order_by("name")
    serializer_class = EngineProfileSerializer
    write_serializer_class = EngineProfileWriteSerializer
    instance_kwarg = "profile"
    create_service = staticmethod(inventory_admin.profile_create)
    update_service = staticmethod(inventory_admin.profile_update)
    delete_service = staticmethod(inventory_admin.profile_delete)


def _choice_param(request: Request, name: str, choices: list[str]) -> str | None:
    value = request.query_params.get(name)
    if value and value not in choices:
        raise ValidationError(
            {name: [f"{value!r} is not one of: {', '.join(choices)}."]}
        )
    return value or None


@extend_schema(
    parameters=[
        OpenApiParameter("cluster", str, description="cluster name"),
        OpenApiParameter("kind", str, enum=list(OperationKind.values)),
        OpenApiParameter("state", str, enum=list(OperationState.values)),
    ]
)
class OperationListView(generics.ListAPIView):
    """All operations, newest first; filter by cluster, kind, state (viewer)."""

    serializer_class = OperationSerializer
    permission_classes = [IsViewer]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = (
            Operation.objects.select_related("cluster")
            .prefetch_related("steps__node")
            .order_by("-created_at", "-pk")
        )
        cluster = self.request.query_params.get("cluster")
        if cluster:
            qs = qs.filter(cluster__name=cluster)
        kind = _choice_param(self.request, "kind", list(OperationKind.values))
        if kind:
            qs = qs.filter(kind=kind)
        state = _choice_param(self.request, "state", list(OperationState.values))
        if state:
            qs = qs.filter(state=state)
        return qs


@extend_schema(request=None, responses={200: OperationSerializer, 409: None})
@api_view(["POST"])
@permission_classes([IsOperator])
def operation_cancel_view(request: Request, pk: int) -> Response:
    """Cancel a queued or running operation (operator); 409 once it has finished."""
    op = get_object_or_404(Operation, pk=pk)
    if op.finished_at is not None or op.state not in (
        OperationState.QUEUED,
        OperationState.RUNNING,
    ):
        return Response(
            {"detail": f"operation {op.pk} already finished ({op.state})."},
            status=status.HTTP_409_CONFLICT,
        )
    op = operation_cancel(operation=op, user=request.user, request=request._request)
    return Response(OperationSerializer(op).data)


@extend_schema(
    parameters=[
        OpenApiParameter("actor", str, description="actor username"),
        OpenApiParameter(
            "action",
            str,
            description="action, e.g. operation.start; a trailing '.' matches a prefix",
        ),
        OpenApiParameter("since", str, description="ISO 8601 date-time"),
    ]
)
class AuditEventListView(generics.ListAPIView):
    """Audit events, newest first (admin)."""

    serializer_class = AuditEventSerializer
    permission_classes = [IsAdmin]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        from django.utils.dateparse import parse_datetime

        qs = AuditEvent.objects.order_by("-created_at", "-pk")
        params = self.request.query_params
        if params.get("actor"):
            qs = qs.filter(actor_name=params["actor"])
        action = params.get("action")
        if action:
            qs = (
                qs.filter(action__startswith=action)
                if action.endswith(".")
                else qs.filter(action=action)
            )
        since = params.get("since")
        if since:
            try:
                parsed = parse_datetime(since)
            except ValueError:  # well formed but no date: month 13, day 40
                parsed = None
            if parsed is None:
                raise ValidationError(
                    {"since": ["Use an ISO 8601 date-time, e.g. 2026-01-31T12:00:00Z."]}
                )
            qs = qs.filter(created_at__gte=parsed)
        return qs


@extend_schema(methods=["POST"], request=None, responses={201: TokenSerializer})
@extend_schema(methods=["DELETE"], request=None, responses={204: None, 404: None})
@api_view(["POST", "DELETE"])
@permission_classes([IsAuthenticated])
def token_me(request: Request) -> Response:
    """POST: create or rotate your API token (shown once). DELETE: revoke it."""
    if request.method == "POST":
        key = token_rotate(
            user=request.user, actor=request.user, request=request._request
        )
        return Response({"token": key}, status=status.HTTP_201_CREATED)
    if token_revoke(user=request.user, actor=request.user, request=request._request):
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response({"detail": "You have no token."}, status=status.HTTP_404_NOT_FOUND)
