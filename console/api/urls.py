from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from console.api import acceptance, apikeys, remediation, views

router = SimpleRouter()
router.register("clusters", views.ClusterViewSet, basename="api-cluster")
router.register("nodes", views.NodeViewSet, basename="api-node")
router.register("profiles", views.EngineProfileViewSet, basename="api-profile")

urlpatterns = [
    path("clusters/<str:name>/gate/", acceptance.cluster_gate, name="api-cluster-gate"),
    path("benchmarks/", acceptance.benchmark_list, name="api-benchmarks"),
    path(
        "benchmarks/<int:pk>/", acceptance.benchmark_detail, name="api-benchmark-detail"
    ),
    path("operations/", views.OperationListView.as_view(), name="api-operations"),
    path(
        "operations/<int:pk>/cancel/",
        views.operation_cancel_view,
        name="api-operation-cancel",
    ),
    path("audit/", views.AuditEventListView.as_view(), name="api-audit"),
    path("tokens/me/", views.token_me, name="api-token-me"),
    path("apikeys/", apikeys.apikeys, name="api-apikeys"),
    path("apikeys/policy/", apikeys.apikey_policy, name="api-apikey-policy"),
    path(
        "apikeys/<int:pk>/revoke/", apikeys.apikey_revoke_view, name="api-apikey-revoke"
    ),
    path(
        "clusters/<slug:name>/operations/",
        views.cluster_operations,
        name="api-cluster-operations",
    ),
    path("operations/<int:pk>/", views.operation_detail, name="api-operation-detail"),
    path(
        "clusters/<slug:name>/maintenance/",
        remediation.cluster_maintenance_view,
        name="api-cluster-maintenance",
    ),
    path(
        "clusters/<slug:name>/failback/",
        remediation.cluster_failback_view,
        name="api-cluster-failback",
    ),
    path(
        "nodes/<slug:name>/readmit/",
        remediation.node_readmit_view,
        name="api-node-readmit",
    ),
    path("", include(router.urls)),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"
    ),
]
