"""Read queries and read shapes for the Benchmarks pages (list, one run, sweep charts, compare, export).

Writes (import, baseline) stay in ``console.services.benchmarks``; this module only reads.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from console.models import BenchmarkRun, Cluster, Operation
from console.services.benchmarks import baselines_by_cluster, run_to_dict, verdict_of
from engine import bench

LIST_MAX = 200  # newest runs on the page (the REST list's cap too)
EXPORT_MAX = 5000  # runs in one export file
IDS_MAX = 50  # runs a user can tick for one chart
METRICS = ("ttft", "tpot", "itl", "e2el")
SLUG = re.compile(
    r"[-\w]{1,120}", re.ASCII
)  # cluster names are slugs (/clusters/<slug:name>/)
CONTROL = re.compile(
    r"[\x00-\x1f\x7f]"
)  # NUL and friends: PostgreSQL refuses NUL in text


class FilterError(ValueError):
    """A bad filter value; ``field`` names the query parameter, the message says the fix."""

    def __init__(self, field: str, message: Any) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = str(message)


@dataclass(frozen=True)
class BenchFilter:
    """What the list, the chart and the exports show: a cluster, a sweep, or ticked runs."""

    cluster: str = ""
    sweep: str = ""
    ids: tuple[int, ...] = ()

    def query(self) -> str:
        """The filter as a query string (for the export links), empty parts left out."""
        parts = []
        if self.cluster:
            parts.append(f"cluster={self.cluster}")
        if self.sweep:
            parts.append(f"sweep={self.sweep}")
        if self.ids:
            parts.append("ids=" + ",".join(str(i) for i in self.ids))
        return "&".join(parts)


def benchmark_filter(params: Any) -> BenchFilter:
    """Parse ``?cluster=NAME&sweep=ID&ids=1,2,3``. Raises FilterError naming the field."""
    cluster = (params.get("cluster") or "").strip()
    if cluster and (
        not SLUG.fullmatch(cluster) or not Cluster.objects.filter(name=cluster).exists()
    ):
        names = ", ".join(
            Cluster.objects.order_by("name").values_list("name", flat=True)
        )
        raise FilterError(
            "cluster",
            _("no cluster named {name}; use one of: {names}").format(
                name=repr(cluster), names=names or "—"
            ),
        )
    sweep = (params.get("sweep") or "").strip()
    if len(sweep) > 40 or CONTROL.search(sweep):
        raise FilterError(
            "sweep", _("a sweep id: at most 40 characters, no control characters")
        )
    # ids=3,4,7 in a link; ids=3&ids=4 from the list's checkboxes
    getlist = getattr(params, "getlist", None)
    raw_ids = ",".join(getlist("ids") if getlist else [params.get("ids") or ""]).strip()
    ids: tuple[int, ...] = ()
    if raw_ids:
        if not re.fullmatch(r"\d{1,9}(,\d{1,9})*", raw_ids):
            raise FilterError(
                "ids", _("run numbers separated by commas, e.g. ids=3,4,7")
            )
        ids = tuple(dict.fromkeys(int(i) for i in raw_ids.split(",")))
        if len(ids) > IDS_MAX:
            raise FilterError("ids", _("at most {n} runs at a time").format(n=IDS_MAX))
    return BenchFilter(cluster=cluster, sweep=sweep, ids=ids)


def benchmark_list(flt: BenchFilter) -> QuerySet[BenchmarkRun]:
    """The filtered runs, newest first, with their cluster and profile (for targets)."""
    runs = BenchmarkRun.objects.select_related("cluster__profile")
    if flt.cluster:
        runs = runs.filter(cluster__name=flt.cluster)
    if flt.sweep:
        runs = runs.filter(sweep=flt.sweep)
    if flt.ids:
        runs = runs.filter(pk__in=flt.ids)
    return runs.order_by("-date", "-pk")


def sweep_operation(sweep: str) -> Operation | None:
    """The benchmark operation that ran a sweep (its runs are stored as sweep ``op<id>``
    by console/services/runbooks/bench.py); None for imported sweeps."""
    m = re.fullmatch(r"op(\d{1,9})", sweep)
    return Operation.objects.filter(pk=int(m.group(1))).first() if m else None


def benchmark_get(pk: int) -> BenchmarkRun | None:
    return BenchmarkRun.objects.select_related("cluster__profile").filter(pk=pk).first()


def benchmark_row(
    run: BenchmarkRun, baselines: dict[int, BenchmarkRun] | None = None
) -> dict[str, Any]:
    """One run's list row: the run, its verdict, its p99 TTFT and E2EL."""
    verdict = verdict_of(run, baselines=baselines)
    return {
        "run": run,
        "verdict": verdict,
        "p99_ttft_ms": run.latency_ms.get("p99_ttft_ms"),
        "p99_e2el_ms": run.latency_ms.get("p99_e2el_ms"),
    }


def benchmark_rows_flat(runs: list[BenchmarkRun]) -> list[dict[str, Any]]:
    """Rows of the given runs in their order (the sweep page's table)."""
    baselines = baselines_by_cluster({r.cluster_id for r in runs if r.cluster_id})
    return [benchmark_row(r, baselines) for r in runs]


def benchmark_rows(runs: list[BenchmarkRun]) -> list[dict[str, Any]]:
    """List items, newest first: a single run, or a sweep with its points (lowest load first).

    Each item: ``{"sweep": id or "", "rows": [...], "date", "cluster", ...}``; a sweep
    appears where its newest point would.
    """
    items: list[dict[str, Any]] = []
    by_sweep: dict[str, dict[str, Any]] = {}
    baselines = baselines_by_cluster({r.cluster_id for r in runs if r.cluster_id})
    for run in runs:
        row = benchmark_row(run, baselines)
        if not run.sweep:
            items.append({"sweep": "", "rows": [row], "run": run})
            continue
        item = by_sweep.get(run.sweep)
        if item is None:
            item = {"sweep": run.sweep, "rows": [], "run": run}
            by_sweep[run.sweep] = item
            items.append(item)
        item["rows"].append(row)
    for item in by_sweep.values():
        item["rows"].sort(key=lambda r: run_load(r["run"]) or 0.0)
        verdicts = [r["verdict"]["passed"] for r in item["rows"]]
        item["passed"] = (
            False if False in verdicts else (True if True in verdicts else None)
        )
        item["best_tps"] = max(r["run"].output_throughput for r in item["rows"])
        item["loads"] = [run_load(r["run"]) for r in item["rows"]]
        item["has_baseline"] = any(r["run"].is_baseline for r in item["rows"])
    return items


def run_load(run: BenchmarkRun) -> float | None:
    """A point's x on the charts: its max concurrency, else its request rate."""
    if run.max_concurrency is not None:
        return float(run.max_concurrency)
    return run.request_rate


# vllm bench serve's printed labels (engine.bench.format_table, serve.py), translated
FIGURES: tuple[tuple[str, Any, str], ...] = (
    ("completed", _("Successful requests"), ""),
    ("failed", _("Failed requests"), ""),
    ("max_concurrency", _("Maximum request concurrency"), ""),
    ("duration", _("Benchmark duration"), "s"),
    ("total_input_tokens", _("Total input tokens"), ""),
    ("total_output_tokens", _("Total generated tokens"), ""),
    ("request_throughput", _("Request throughput"), "req/s"),
    ("request_goodput", _("Request goodput"), "req/s"),
    ("output_throughput", _("Output token throughput"), "tok/s"),
    ("max_output_tokens_per_s", _("Peak output token throughput"), "tok/s"),
    ("max_concurrent_requests", _("Peak concurrent requests"), ""),
    ("total_token_throughput", _("Total token throughput"), "tok/s"),
)
METRIC_HEADERS = {
    "ttft": _("Time to First Token"),
    "tpot": _("Time per Output Token (excl. 1st token)"),
    "itl": _("Inter-token Latency"),
    "e2el": _("End-to-end Latency"),
}
STAT_LABELS = {"mean": _("Mean"), "median": _("Median"), "std": _("Std")}


def figure_sections(run: BenchmarkRun) -> list[dict[str, Any]]:
    """``bench show``'s table as sections of (label, value, unit) rows, in its order.

    Optional figures vLLM leaves out (goodput without SLOs, no max concurrency) are left out.
    """
    head = []
    for key, label, unit in FIGURES:
        value = getattr(run, key)
        if value is None and key not in ("completed", "failed"):
            continue
        head.append({"key": key, "label": label, "value": value, "unit": unit})
    sections = [{"title": _("Serving Benchmark Result"), "rows": head}]
    for metric in METRICS:
        rows = []
        for key, value in _latency_items(run.latency_ms, metric):
            rows.append(
                {
                    "key": key,
                    "label": figure_label(key),
                    "value": value,
                    "unit": "ms",
                }
            )
        if rows:
            sections.append({"title": METRIC_HEADERS[metric], "rows": rows})
    return sections


def figure_label(key: str) -> str:
    """A figure's name in the reader's language: "P99 TTFT", "Output token throughput"."""
    for name, label, _unit in FIGURES:
        if name == key:
            return str(label)
    m = bench.LATENCY_KEY.match(key)
    if m is None:
        return key
    stat = m.group(1)
    return f"{STAT_LABELS.get(stat, stat.upper())} {m.group(2).upper()}"


def labelled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compare rows (engine.bench.compare) with their ``label`` and display ``unit``."""
    for row in rows:
        row["label"] = figure_label(row["name"])
        row["unit"] = (
            "ms"
            if row["name"].endswith("_ms")
            else ("req/s" if row["name"] == "request_throughput" else "tok/s")
        )
    return rows


def _latency_items(latency: dict[str, float], metric: str) -> list[tuple[str, float]]:
    """One metric's figures in vLLM's order: mean, median, std, then percentiles ascending."""

    def order(key: str) -> tuple[int, float]:
        stat = key.split("_", 1)[0]
        if stat in ("mean", "median", "std"):
            return (("mean", "median", "std").index(stat), 0.0)
        return (3, float(stat[1:]))

    keys = [
        k
        for k in latency
        if (m := bench.LATENCY_KEY.match(k)) is not None and m.group(2) == metric
    ]
    return [(k, latency[k]) for k in sorted(keys, key=order)]


def vllm_text(run: BenchmarkRun) -> str:
    """The run exactly as ``vllm bench serve`` (and ``manage.py bench show``) prints it."""
    data = run_to_dict(run)
    figures = {k: data[k] for k in (*bench.REQUIRED, *bench.OPTIONAL_NUM)}
    return bench.format_table(
        figures, run.latency_ms, max_concurrency=run.max_concurrency
    )


def chart_data(runs: list[BenchmarkRun]) -> dict[str, Any]:
    """The sweep charts' columns (uPlot: x ascending), passed to the page with json_script.

    ``load``: points by concurrency (or request rate when the sweep is over rate) with
    p50/p99 TTFT, TPOT, ITL and output throughput; ``latency``: output throughput against
    p99 E2E latency, points by that latency. Points without an x are left off and named.
    """
    by_conc = all(r.max_concurrency is not None for r in runs)
    xs = [(r, run_load(r) if by_conc else r.request_rate) for r in runs]
    charted = sorted(
        ((r, x) for r, x in xs if x is not None), key=lambda p: (p[1], p[0].pk)
    )
    load: dict[str, list[Any]] = {
        "x": [x for _, x in charted],
        "ids": [r.pk for r, _ in charted],
    }
    for metric in METRICS[:3]:
        for stat, key in (("p50", "median"), ("p99", "p99")):
            load[f"{stat}_{metric}"] = [
                r.latency_ms.get(f"{key}_{metric}_ms") for r, _ in charted
            ]
    load["output_throughput"] = [r.output_throughput for r, _ in charted]
    lat = sorted(
        (r for r in runs if r.latency_ms.get("p99_e2el_ms") is not None),
        key=lambda r: (r.latency_ms["p99_e2el_ms"], r.pk),
    )
    return {
        "x_kind": "concurrency" if by_conc else "rate",
        "load": load,
        "latency": {
            "x": [r.latency_ms["p99_e2el_ms"] for r in lat],
            "output_throughput": [r.output_throughput for r in lat],
            "load": [run_load(r) for r in lat],
            "ids": [r.pk for r in lat],
        },
        "left_out": [r.pk for r, x in xs if x is None],
    }


# CSV columns: vllm bench serve --save-result's names (vllm/benchmarks/serve.py, main()'s
# result dict; engine/bench.py's docstring), then the console's own.
CSV_HEAD = (
    "date",
    "model_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    *bench.REQUIRED,
    *bench.OPTIONAL_NUM,
)
CSV_TAIL = (
    "id",
    "sweep",
    "cluster",
    "label",
    "tool",
    "tool_version",
    "output_tps_per_npu",
    "is_baseline",
)


def export_rows(runs: list[BenchmarkRun]) -> list[dict[str, Any]]:
    """The JSON export: each run as the REST API and ``bench list --json`` give it."""
    return [run_to_dict(r) for r in runs]


def export_csv(runs: list[BenchmarkRun]) -> str:
    """The CSV export: one line per run, latency columns the union over the runs in vLLM's order."""
    keys: set[str] = set()
    for r in runs:
        keys.update(r.latency_ms)
    latency_cols = [
        k
        for metric in METRICS
        for k, _ in _latency_items(dict.fromkeys(keys, 0.0), metric)
    ]
    columns = [*CSV_HEAD, *latency_cols, *CSV_TAIL]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for r in runs:
        row = run_to_dict(r)
        row["model_id"] = r.model_id
        row["num_prompts"] = r.num_prompts
        row["burstiness"] = r.burstiness
        # an unlimited rate is "inf" in --save-result files (vllm/benchmarks/serve.py main();
        # engine/bench.py's docstring and tests/data/vllm/bench-serve-save-result.json)
        row["request_rate"] = "inf" if r.request_rate is None else r.request_rate
        writer.writerow(
            {k: ("" if row.get(k) is None else row.get(k)) for k in columns}
        )
    return out.getvalue()
