"""Dashboards (server-rendered; live points arrive over /ws/clusters/<id>/) and their chart-window JSON."""

from __future__ import annotations

import math
import time
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from console import selectors as console_selectors
from console.constants import (
    HBM_USAGE_MAX_PCT,
    HCCS_LOSS_MAX_PCT,
    NPU_TEMP_MAX_C,
    P99_LATENCY_MAX_MS,
    TARGET_TOKENS_PER_S_PER_NPU,
)
from console.models import Cluster, Node
from console.permissions import role_required
from monitoring import selectors
from monitoring.models.alerts import AlertRule

# chart/heatmap key → (alert-rule metric, scale to the chart's unit, default)
RULE_LINES: dict[str, tuple[str, float, float]] = {
    "temp_c": ("chip.temp_c", 1.0, NPU_TEMP_MAX_C),
    "hbm_pct": ("chip.hbm_used_pct", 1.0, HBM_USAGE_MAX_PCT),
    "hccs_loss_pct": ("node.hccs_loss_pct", 1.0, HCCS_LOSS_MAX_PCT),
    "p99_latency_s": ("engine.ttft_p99_ms", 0.001, P99_LATENCY_MAX_MS / 1000.0),
    "kv_cache_pct": ("engine.kv_cache_pct_preempting", 1.0, 90.0),
}


# 2100-01-01: later (or negative) "since" values are no time a chart can start at
MAX_EPOCH_S = 4_102_444_800


def thresholds(cluster: Cluster) -> dict[str, float | None]:
    """The lines the charts draw and the limits the heatmap colours by: the thresholds of
    the enabled alert rules (a rule for this cluster wins over a global one; the lowest
    of several), so editing a rule moves its line. No enabled rule → no line."""
    profile = cluster.profile
    rules: dict[str, tuple[bool, float]] = {}
    for metric, cluster_id, value in (
        AlertRule.objects.filter(
            enabled=True, metric__in=[m for m, _, _ in RULE_LINES.values()]
        )
        .filter(Q(cluster=cluster) | Q(cluster__isnull=True))
        .values_list("metric", "cluster_id", "threshold")
    ):
        key = (cluster_id is not None, -value)  # own cluster first, then the lowest
        if metric not in rules or key > (rules[metric][0], -rules[metric][1]):
            rules[metric] = (cluster_id is not None, value)
    out: dict[str, float | None] = {
        name: (rules[metric][1] * scale if metric in rules else None)
        for name, (metric, scale, _) in RULE_LINES.items()
    }
    out["itl_p99_s"] = (
        None  # no inter-token latency rule: no line rather than a borrowed one
    )
    out["min_gen_tps"] = TARGET_TOKENS_PER_S_PER_NPU * profile.world_size
    out["max_running"] = float(profile.max_num_seqs * profile.data_parallel_size)
    return out


@require_GET
@role_required("viewer")
def index(request: HttpRequest) -> HttpResponse:
    """Clusters with a link to each dashboard."""
    return render(
        request, "monitoring/index.html", {"clusters": console_selectors.cluster_list()}
    )


@require_GET
@role_required("viewer")
def cluster_dashboard(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Node cards, the NPU heatmap, live charts; the range selector re-reads stored history."""
    cluster = get_object_or_404(
        Cluster.objects.select_related("profile"), pk=cluster_id
    )
    nodes = selectors.dashboard_nodes(cluster)
    range_key = request.GET.get("range", "15m")
    if range_key not in selectors.RANGES:
        range_key = "15m"
    max_chips = max((len(n["chips"]) for n in nodes), default=0) or max(
        (n["node"].npu_count for n in nodes), default=0
    )
    config = {
        "cluster": cluster.pk,
        "clusterState": cluster.state,
        "range": range_key,
        "ranges": selectors.RANGES,
        "nodes": [n["node"].name for n in nodes],
        "thresholds": thresholds(cluster),
        "seriesUrl": reverse("cluster-series", args=[cluster.pk]),
        "collectIntervalS": settings.COLLECT_INTERVAL_S,
    }
    return render(
        request,
        "monitoring/cluster_dashboard.html",
        {
            "cluster": cluster,
            "nodes": nodes,
            "chip_columns": range(max_chips),
            "config": config,
            "thresholds": config["thresholds"],
            "range_key": range_key,
            "ranges": selectors.RANGES,
            "vendor_ok": finders.find("vendor/uplot/uPlot.iife.min.js") is not None,
        },
    )


def _trim(window: dict[str, Any], until: float) -> dict[str, Any]:
    """Drop the points after ``until`` (epoch s) from every series of a chart window."""
    for key in ("engine", "node_series"):
        part = window.get(key)
        if not part:
            continue
        n = len(part["t"])
        keep = [i for i, t in enumerate(part["t"]) if t <= until]
        for name, col in list(part.items()):
            if not isinstance(col, list) or name == "chips":
                continue
            if col and isinstance(col[0], list):  # one column per chip
                part[name] = [[c[i] for i in keep] for c in col]
            elif len(col) == n:
                part[name] = [col[i] for i in keep]
    return window


def _epoch(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


@require_GET
@role_required("viewer")
def cluster_series(request: HttpRequest, cluster_id: int) -> JsonResponse:
    """Stored history for the charts: ?range=15m|1h|6h|24h&node=<name>&since=<epoch seconds>
    (backfill), or an absolute window ?from=<epoch>&to=<epoch> (within ROLLUP_RETENTION_D)."""
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    until: float | None = None
    if "from" in request.GET or "to" in request.GET:
        start, until = (
            _epoch(request.GET.get("from", "")),
            _epoch(request.GET.get("to", "")),
        )
        now = time.time()
        if start is None or until is None or not start < until:
            return JsonResponse(
                {
                    "error": {
                        "from": "from and to are epoch seconds with from < to, e.g. from=1764700000&to=1764703600"
                    }
                },
                status=400,
            )
        kept_s = settings.ROLLUP_RETENTION_D * 86400  # rollups are pruned after that
        if now - start > kept_s:
            return JsonResponse(
                {
                    "error": {
                        "from": f"at most {settings.ROLLUP_RETENTION_D} days back (ROLLUP_RETENTION_D); older minutes are pruned"
                    }
                },
                status=400,
            )
        range_s: int | None = int(now - start) + 1
    else:
        range_s = selectors.RANGES.get(request.GET.get("range", "15m"))
    if range_s is None:
        return JsonResponse(
            {"error": {"range": f"use one of {', '.join(selectors.RANGES)}"}},
            status=400,
        )
    node = None
    if name := request.GET.get("node"):
        node = Node.objects.filter(cluster=cluster, name=name).first()
        if node is None:
            raise Http404(f"no node {name} in {cluster.name}")
    since: float | None = None
    if raw := request.GET.get("since"):
        try:
            since = float(raw)
        except ValueError:
            since = math.nan
        # a real epoch time: nan, inf, 1e20 and -1e15 are no date (and overflow datetime)
        if not (math.isfinite(since) and 0 <= since <= MAX_EPOCH_S):
            return JsonResponse(
                {"error": {"since": "seconds since the epoch, e.g. 1764700000.5"}},
                status=400,
            )
    window = selectors.chart_window(cluster, range_s=range_s, node=node, since=since)
    return JsonResponse(_trim(window, until) if until is not None else window)
