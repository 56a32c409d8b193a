from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog

from console.views import (
    account,
    benchmark_run,
    benchmarks,
    dashboard,
    evidence,
    operations,
)

benchmark_patterns = [
    path("", benchmarks.benchmark_list_view, name="benchmarks"),
    path("run/", benchmark_run.benchmark_run_view, name="benchmark-run"),
    path("<int:pk>/", benchmarks.benchmark_detail_view, name="benchmark-detail"),
    path(
        "<int:pk>/baseline/",
        benchmarks.benchmark_baseline_view,
        name="benchmark-baseline",
    ),
    path("sweep/", benchmarks.benchmark_sweep_view, name="benchmark-sweep"),
    path("compare/", benchmarks.benchmark_compare_view, name="benchmark-compare"),
    path("export.json", benchmarks.benchmark_export_json, name="benchmark-export-json"),
    path("export.csv", benchmarks.benchmark_export_csv, name="benchmark-export-csv"),
]

urlpatterns = [
    path("", dashboard.overview, name="overview"),
    path("healthz", dashboard.healthz, name="healthz"),
    path("clusters/<slug:name>/", operations.cluster_detail, name="cluster-detail"),
    path(
        "clusters/<slug:name>/operations/",
        operations.operation_create,
        name="operation-create",
    ),
    path(
        "clusters/<slug:name>/maintenance/",
        operations.cluster_maintenance,
        name="cluster-maintenance",
    ),
    path(
        "clusters/<slug:name>/failback/",
        operations.cluster_failback_view,
        name="cluster-failback",
    ),
    path(
        "nodes/<slug:name>/readmit/", operations.node_readmit_view, name="node-readmit"
    ),
    path(
        "clusters/<slug:name>/evidence/",
        evidence.evidence_collect_view,
        name="evidence-collect",
    ),
    path(
        "evidence/<int:pk>/download/",
        evidence.evidence_download,
        name="evidence-download",
    ),
    path("benchmarks/", include(benchmark_patterns)),
    path("operations/", operations.operation_list, name="operation-list"),
    path("operations/<int:pk>/", operations.operation_detail, name="operation-detail"),
    path(
        "operations/<int:pk>/cancel/",
        operations.operation_cancel_view,
        name="operation-cancel",
    ),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="console/login.html"),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/token/", account.account_token, name="account-token"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("admin/", admin.site.urls),
    # monitoring's API (telemetry, alerts, incidents, rules) beside console's, under /api/
    path("api/", include("monitoring.api")),
    path("api/", include("console.api.urls")),
    path("v1/", include("console.gateway.urls")),
    path("apikeys/", include("console.gateway.page_urls")),
    path("playground/", include("console.playground.urls")),
    path("", include("monitoring.urls")),
]

# A styled, translated 403 with the navigation and who can grant access.
handler403 = "console.views.errors.permission_denied"
