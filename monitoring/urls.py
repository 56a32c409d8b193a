from __future__ import annotations

from django.urls import include, path

from monitoring.views import dashboards, metrics, nodes

urlpatterns = [
    path("monitoring/", dashboards.index, name="monitoring-index"),
    path(
        "monitoring/clusters/<int:cluster_id>/",
        dashboards.cluster_dashboard,
        name="cluster-dashboard",
    ),
    path(
        "monitoring/clusters/<int:cluster_id>/series",
        dashboards.cluster_series,
        name="cluster-series",
    ),
    path("nodes/<slug:name>/", nodes.node_detail, name="node-detail"),
    path("metrics", metrics.metrics, name="metrics"),
    path("", include("monitoring.alerts.urls")),
]
