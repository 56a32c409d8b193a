"""Benchmarks pages: results newest first, one run, sweep charts, two runs compared, exports.

These pages read results (console.selectors_benchmarks) and mark a baseline through the
audited service; the list also carries the form that starts a run (console.views.benchmark_run).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.staticfiles import finders
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from console import selectors_benchmarks as sel
from console.models import BenchmarkRun, Cluster, ClusterState
from console.permissions import has_role, role_required
from console.services.benchmarks import (
    baseline_of,
    benchmark_compare,
    benchmark_set_baseline,
    same_shape,
    verdict_of,
)

SERVING_STATES = (ClusterState.RUNNING, ClusterState.DEGRADED)


def _bad(request: HttpRequest, err: sel.FilterError) -> HttpResponse:
    """400 naming the field: JSON for the exports, the page's message otherwise."""
    if request.path.endswith((".json", ".csv")):
        return JsonResponse({"error": {err.field: err.message}}, status=400)
    return render(
        request,
        "console/benchmarks/bad_filter.html",
        {"field": err.field, "message": err.message},
        status=400,
    )


def _vendor_ok() -> bool:
    return finders.find("vendor/uplot/uPlot.iife.min.js") is not None


@require_GET
@role_required("viewer")
def benchmark_list_view(request: HttpRequest) -> HttpResponse:
    """Runs newest first (?cluster= filters), a sweep as one row that opens its points."""
    try:
        flt = sel.benchmark_filter(request.GET)
    except sel.FilterError as err:
        return _bad(request, err)
    return list_page(request, flt)


def list_page(
    request: HttpRequest,
    flt: sel.BenchFilter,
    *,
    run_form: dict[str, str] | None = None,
    run_errors: dict[str, str] | None = None,
) -> HttpResponse:
    """The list, with the run form (a refused run: its values and the field at fault, 400)."""
    runs = list(sel.benchmark_list(flt)[: sel.LIST_MAX + 1])
    more = len(runs) > sel.LIST_MAX
    runs = runs[: sel.LIST_MAX]
    return render(
        request,
        "console/benchmarks/list.html",
        {
            "items": sel.benchmark_rows(runs),
            "count": len(runs),
            "more": more,
            "list_max": sel.LIST_MAX,
            "filter": flt,
            "clusters": Cluster.objects.order_by("name").values_list("name", flat=True),
            "serving": Cluster.objects.filter(state__in=SERVING_STATES)
            .order_by("name")
            .values_list("name", flat=True),
            "can_run": has_role(request.user, "operator"),
            "run_form": run_form
            or {"concurrency": "1,8,32", "num_prompts": "", "label": ""},
            "run_errors": run_errors or {},
        },
        status=400 if run_errors else 200,
    )


def _run_or_404(pk: int) -> BenchmarkRun:
    run = sel.benchmark_get(pk)
    if run is None:
        raise Http404(f"no benchmark #{pk}")
    return run


@require_GET
@role_required("viewer")
def benchmark_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: vLLM's table, the target checks with margins, regression vs the baseline."""
    run = _run_or_404(pk)
    verdict = verdict_of(run)
    base = baseline_of(run)
    comparable = base is not None and same_shape(base, run)
    comparison = (
        benchmark_compare(base, run) if base is not None and comparable else None
    )
    if comparison is not None:
        comparison["figures"] = sel.labelled(comparison["figures"])
    return render(
        request,
        "console/benchmarks/detail.html",
        {
            "run": run,
            "verdict": verdict,
            "sections": sel.figure_sections(run),
            "vllm_text": sel.vllm_text(run),
            "baseline": base,
            "comparable": comparable,
            "comparison": comparison,
            "versions": sorted(run.engine_versions.items()),
            "can_mark": has_role(request.user, "operator") and run.cluster_id,
        },
    )


@require_POST
@role_required("operator")
def benchmark_baseline_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Make the run its cluster's baseline (audited); later runs are compared with it."""
    run = _run_or_404(pk)
    if run.cluster_id is None:
        messages.error(
            request,
            _(
                "Run #{id} has no cluster, so it cannot be a cluster's baseline; import it with a cluster."
            ).format(id=run.pk),
        )
    else:
        benchmark_set_baseline(run, actor=request.user, request=request)
        messages.success(
            request,
            _("Run #{id} is now the baseline of {cluster}.").format(
                id=run.pk, cluster=run.cluster.name if run.cluster else ""
            ),
        )
    return redirect("benchmark-detail", pk=run.pk)


@require_GET
@role_required("viewer")
def benchmark_sweep_view(request: HttpRequest) -> HttpResponse:
    """Charts of one sweep (?sweep=ID) or of the ticked runs (?ids=1,2,3)."""
    try:
        flt = sel.benchmark_filter(request.GET)
        if not flt.sweep and not flt.ids:
            raise sel.FilterError(
                "sweep",
                _("give a sweep (?sweep=ID) or the runs to chart (?ids=3,4,7)"),
            )
    except sel.FilterError as err:
        return _bad(request, err)
    runs = list(sel.benchmark_list(flt)[: sel.LIST_MAX])
    if not runs:
        raise Http404("no runs match")
    points = sorted(runs, key=lambda r: (sel.run_load(r) or 0.0, r.pk))
    return render(
        request,
        "console/benchmarks/sweep.html",
        {
            "filter": flt,
            "operation": sel.sweep_operation(flt.sweep),
            "rows": sel.benchmark_rows_flat(points),
            "chart": sel.chart_data(runs),
            "vendor_ok": _vendor_ok(),
        },
    )


def _pk_param(request: HttpRequest, name: str) -> BenchmarkRun:
    raw = request.GET.get(name, "").strip()
    if not raw.isdigit() or len(raw) > 9:
        raise sel.FilterError(
            name, _("a run number, e.g. compare/?a=3&b=4 (tick two runs on the list)")
        )
    run = sel.benchmark_get(int(raw))
    if run is None:
        raise sel.FilterError(
            name, _("there is no run #{id}; pick one from the list").format(id=raw)
        )
    return run


def _pair(request: HttpRequest) -> tuple[BenchmarkRun, BenchmarkRun]:
    """``?a=&b=``, or the list's two ticked runs (``ids``), the older one as the base."""
    if "a" not in request.GET and request.GET.get("ids"):
        ids = sel.benchmark_filter(request.GET).ids
        if len(ids) != 2:
            raise sel.FilterError(
                "ids",
                _("tick exactly two runs to compare (you ticked {n})").format(
                    n=len(ids)
                ),
            )
        runs = sorted(
            (r for r in (sel.benchmark_get(i) for i in ids) if r is not None),
            key=lambda r: (r.date, r.pk),
        )
        if len(runs) != 2:
            raise sel.FilterError("ids", _("one of the ticked runs no longer exists"))
        return runs[0], runs[1]
    return _pk_param(request, "a"), _pk_param(request, "b")


@require_GET
@role_required("viewer")
def benchmark_compare_view(request: HttpRequest) -> HttpResponse:
    """Run ``b`` against base run ``a``: figures with Δ %, regressions, and which flag or env changed."""
    try:
        a, b = _pair(request)
    except sel.FilterError as err:
        return _bad(request, err)
    data = benchmark_compare(a, b)
    data["figures"] = sel.labelled(data["figures"])
    return render(
        request,
        "console/benchmarks/compare.html",
        {
            "a": a,
            "b": b,
            "data": data,
            "verdicts": (verdict_of(a), verdict_of(b)),
            "versions": _version_rows(a, b),
        },
    )


def _version_rows(a: BenchmarkRun, b: BenchmarkRun) -> list[dict[str, Any]]:
    names = sorted(set(a.engine_versions) | set(b.engine_versions))
    return [
        {
            "name": n,
            "a": a.engine_versions.get(n),
            "b": b.engine_versions.get(n),
            "changed": a.engine_versions.get(n) != b.engine_versions.get(n),
        }
        for n in names
    ]


def _export_runs(request: HttpRequest) -> list[BenchmarkRun]:
    return list(sel.benchmark_list(sel.benchmark_filter(request.GET))[: sel.EXPORT_MAX])


@require_GET
@role_required("viewer")
def benchmark_export_json(request: HttpRequest) -> HttpResponse:
    """The runs the filter shows, as the REST API gives them (vLLM's field names)."""
    try:
        runs = _export_runs(request)
    except sel.FilterError as err:
        return _bad(request, err)
    response = HttpResponse(
        json.dumps(sel.export_rows(runs), indent=2, ensure_ascii=False),
        content_type="application/json",
    )
    response["Content-Disposition"] = 'attachment; filename="benchmarks.json"'
    return response


@require_GET
@role_required("viewer")
def benchmark_export_csv(request: HttpRequest) -> HttpResponse:
    """The runs the filter shows, one CSV line each, vLLM's field names as the header."""
    try:
        runs = _export_runs(request)
    except sel.FilterError as err:
        return _bad(request, err)
    response = HttpResponse(
        sel.export_csv(runs), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="benchmarks.csv"'
    return response
