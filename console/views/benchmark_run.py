"""Start a benchmark run from the Benchmarks page (operators): the form's fields are
``vllm bench serve``'s knobs; the run is an operation (console.services.runbooks.bench),
so the answer is its live page. A bad field re-renders the list with the message
beside it (400), and nothing is queued."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from console import selectors_benchmarks as sel
from console.models import Cluster
from console.models.operations import OperationKind
from console.permissions import role_required
from console.services.audit import client_ip
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_start,
)
from console.views.benchmarks import list_page

FIELDS = (
    "concurrency",
    "request_rate",
    "input_len",
    "output_len",
    "num_prompts",
    "burstiness",
    "goodput",
    "label",
    "target",
)


@require_POST
@role_required("operator")
def benchmark_run_view(request: HttpRequest) -> HttpResponse:
    form = {f: request.POST.get(f, "").strip() for f in FIELDS}
    cluster = get_object_or_404(Cluster, name=request.POST.get("cluster", ""))
    bench = {k: v for k, v in form.items() if v}
    try:
        op = operation_start(
            cluster=cluster,
            kind=OperationKind.BENCHMARK,
            user=request.user,
            reason=request.POST.get("reason", "").strip(),
            source="ui",
            source_ip=client_ip(request),
            params={"bench": bench},
            request=request,
        )
    except OperationRefused as exc:
        field = exc.field if exc.field in FIELDS else "cluster"
        return list_page(
            request,
            sel.benchmark_filter({}),
            run_form={**form, "cluster": cluster.name},
            run_errors={field: str(exc)},
        )
    except OperationConflict as exc:
        return list_page(
            request,
            sel.benchmark_filter({}),
            run_form={**form, "cluster": cluster.name},
            run_errors={"cluster": str(exc)},
        )
    return redirect("operation-detail", pk=op.pk)
