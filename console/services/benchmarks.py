"""Benchmark results: import (``vllm bench serve --save-result`` JSON), targets, baseline, compare."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import transaction

from console.models import BenchmarkRun, Cluster
from console.services.audit import audit_record
from console.services.plans import cluster_plan
from engine import bench
from engine.plans import PlanError


def plan_snapshot(cluster: Cluster) -> tuple[str, dict[str, Any]]:
    """(sha256 digest, {node: {argv, env}}) of the cluster's launch plan; ("", {}) if it cannot be built."""

    try:
        plan = cluster_plan(cluster)
    except PlanError:
        return "", {}
    nodes = {n.name: {"argv": n.argv, "env": n.env} for n in plan.nodes}
    digest = hashlib.sha256(json.dumps(nodes, sort_keys=True).encode()).hexdigest()
    return digest, nodes


def _npus(cluster: Cluster) -> int:
    return sum(n.npu_count for n in cluster.ranked_nodes())


def benchmark_store(
    result: bench.BenchResult,
    *,
    cluster: Cluster | None,
    tool: str,
    tool_version: str = "",
    source: str = "import",
    target: str = "head",
    sweep: str = "",
    input_len: int | None = None,
    output_len: int | None = None,
    label: str = "",
    actor: Any = None,
    raw: dict[str, Any] | None = None,
) -> BenchmarkRun:
    """Store one parsed result with the cluster's plan digest, engine versions and NPU count (audited)."""
    digest, plan = plan_snapshot(cluster) if cluster is not None else ("", {})
    versions = (
        {
            "vllm": cluster.profile.vllm_version,
            "vllm_ascend": cluster.profile.vllm_ascend_version,
        }
        if cluster is not None
        else {}
    )
    meta = dict(result.meta)
    kept = {k: v for k, v in (raw or {}).items() if k not in bench.PER_REQUEST}
    with transaction.atomic():
        run = BenchmarkRun.objects.create(
            cluster=cluster,
            label=(label or result.label)[:120],
            sweep=sweep,
            source=source,
            target=target,
            tool=tool,
            tool_version=tool_version,
            model_id=result.model_id[:200],
            num_prompts=result.num_prompts,
            request_rate=result.request_rate,
            burstiness=result.burstiness,
            max_concurrency=result.max_concurrency,
            input_len=input_len or _int(meta.get("random_input_len")),
            output_len=output_len or _int(meta.get("random_output_len")),
            npu_count=_npus(cluster) if cluster is not None else None,
            plan_digest=digest,
            engine_versions=versions,
            latency_ms=result.latency_ms,
            raw={**kept, "plan": plan},
            created_by=actor if getattr(actor, "pk", None) else None,
            **{
                k: (v if v is not None else None)
                for k, v in result.figures.items()
                if k != "failed"
            },
            failed=int(result.figures.get("failed") or 0),
            **({"date": result.date} if result.date else {}),
        )
        audit_record(
            action="benchmark.store",
            actor=actor,
            target=run,
            target_repr=f"benchmark #{run.pk}",
            after={
                "source": source,
                "tool": tool,
                "cluster": cluster.name if cluster else None,
            },
        )
    return run


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _mean_len(values: Any) -> int | None:
    """The shape of a random-dataset run: the requests' mean input (or output) length."""
    if not isinstance(values, list) or not values:
        return None
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return round(sum(nums) / len(nums)) if nums else None


def benchmark_import(
    raw: Any, *, cluster: Cluster | None, label: str = "", actor: Any = None
) -> BenchmarkRun:
    """Import a ``vllm bench serve --save-result`` JSON object. Raises bench.ResultInvalid."""
    result = bench.parse_result(raw)
    return benchmark_store(
        result,
        cluster=cluster,
        input_len=_mean_len(raw.get("input_lens")),
        output_len=_mean_len(raw.get("output_lens")),
        tool="vllm bench serve",
        tool_version=str(raw.get("vllm_version") or raw.get("version") or ""),
        source="import",
        label=label,
        actor=actor,
        raw=raw,
    )


def target_of(run: BenchmarkRun) -> bench.Target | None:
    if run.cluster is None:
        return None
    p = run.cluster.profile
    return bench.Target(
        p.target_concurrency,
        p.target_input_len,
        p.target_output_len,
        p.target_output_tps_per_npu,
        p.target_p99_ttft_ms,
        p.target_p99_e2el_ms,
    )


def target_checks(run: BenchmarkRun) -> list[bench.Check]:
    """The profile's target checks for this run; empty when the run is not at the target's shape."""
    target = target_of(run)
    if target is None:
        return []
    shape_known = run.max_concurrency is not None
    if shape_known and run.max_concurrency != target.concurrency:
        return []
    if run.input_len and run.input_len != target.input_len:
        return []
    if run.output_len and run.output_len != target.output_len:
        return []
    return bench.check_target(
        target, output_tps_per_npu=run.output_tps_per_npu, latency_ms=run.latency_ms
    )


def figures_of(run: BenchmarkRun) -> dict[str, float | None]:
    return {
        "output_throughput": run.output_throughput,
        "total_token_throughput": run.total_token_throughput,
        "request_throughput": run.request_throughput,
        **run.latency_ms,
    }


def plan_diff(a: BenchmarkRun, b: BenchmarkRun) -> list[str]:
    """Which flags/env differ between the two runs' plans (head node view, then per node)."""
    pa, pb = a.raw.get("plan") or {}, b.raw.get("plan") or {}
    out: list[str] = []
    for node in sorted(set(pa) | set(pb)):
        na, nb = pa.get(node), pb.get(node)
        if na is None or nb is None:
            out.append(f"{node}: only in run #{a.pk if nb is None else b.pk}")
            continue
        ea, eb = na.get("env", {}), nb.get("env", {})
        for k in sorted(set(ea) | set(eb)):
            if ea.get(k) != eb.get(k):
                out.append(f"{node}: env {k} {ea.get(k)!r} → {eb.get(k)!r}")
        fa, fb = _flags(na.get("argv", [])), _flags(nb.get("argv", []))
        for k in sorted(set(fa) | set(fb)):
            if fa.get(k) != fb.get(k):
                out.append(f"{node}: {k} {fa.get(k)!r} → {fb.get(k)!r}")
    return out


def _flags(argv: list[str]) -> dict[str, str | None]:
    """``vllm serve`` argv as {flag: value}; a switch maps to "", positionals to "argN"."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            if "=" in tok:
                flag, _, value = tok.partition("=")
                out[flag] = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out[tok] = argv[i + 1]
                i += 1
            else:
                out[tok] = ""
        else:
            out[f"arg{i}"] = tok
        i += 1
    return out


def benchmark_compare(a: BenchmarkRun, b: BenchmarkRun) -> dict[str, Any]:
    """``a`` as the base, ``b`` as the new run: figure deltas, regressions, plan differences."""
    threshold = a.cluster.profile.regression_threshold_pct if a.cluster else 3.0
    rows = bench.compare(figures_of(a), figures_of(b), threshold)
    return {
        "base": a.pk,
        "other": b.pk,
        "threshold_pct": threshold,
        "figures": rows,
        "regressed": any(r["regressed"] for r in rows),
        "same_plan": bool(a.plan_digest) and a.plan_digest == b.plan_digest,
        "plan_diff": plan_diff(a, b),
    }


def benchmark_set_baseline(
    run: BenchmarkRun, *, actor: Any = None, request: Any = None
) -> BenchmarkRun:
    """Make ``run`` its cluster's baseline (one per cluster), audited (with the request's
    address and id when a page or the API asks)."""
    with transaction.atomic():
        BenchmarkRun.objects.filter(cluster=run.cluster, is_baseline=True).update(
            is_baseline=False
        )
        run.is_baseline = True
        run.save(update_fields=["is_baseline"])
        audit_record(
            action="benchmark.baseline",
            actor=actor,
            request=request,
            target=run,
            target_repr=f"benchmark #{run.pk}",
        )
    return run


def baseline_of(run: BenchmarkRun) -> BenchmarkRun | None:
    if run.cluster is None:
        return None
    return (
        BenchmarkRun.objects.filter(cluster=run.cluster, is_baseline=True)
        .exclude(pk=run.pk)
        .first()
    )


def baselines_by_cluster(cluster_ids: set[int]) -> dict[int, BenchmarkRun]:
    """Each cluster's baseline run, in one query."""
    runs = BenchmarkRun.objects.filter(cluster_id__in=cluster_ids, is_baseline=True)
    return {
        r.cluster_id: r
        for r in runs.select_related("cluster__profile")
        if r.cluster_id is not None
    }


def same_shape(a: BenchmarkRun, b: BenchmarkRun) -> bool:
    """Whether two runs loaded the engine alike (concurrency, rate, input and output length):
    only then is a change in their figures a regression (a sweep's concurrency-1 point is
    not slower than a concurrency-8 baseline)."""
    return (a.max_concurrency, a.request_rate, a.input_len, a.output_len) == (
        b.max_concurrency,
        b.request_rate,
        b.input_len,
        b.output_len,
    )


def verdict_of(
    run: BenchmarkRun, *, baselines: dict[int, BenchmarkRun] | None = None
) -> dict[str, Any]:
    """Pass/fail: every target check passes and nothing regressed against the baseline
    (compared only when the baseline ran at the same shape). ``baselines`` ({cluster id:
    baseline run}, from ``baselines_by_cluster``) spares a query per run on a list."""
    checks = target_checks(run)
    if baselines is None:
        base = baseline_of(run)
    else:
        found = baselines.get(run.cluster_id) if run.cluster_id else None
        base = found if found is not None and found.pk != run.pk else None
    if base is not None and not same_shape(base, run):
        base = None
    comparison = benchmark_compare(base, run) if base is not None else None
    regressed = bool(comparison and comparison["regressed"])
    return {
        "checks": [c.to_dict() for c in checks],
        "baseline": base.pk if base is not None else None,
        "regressed": regressed,
        "passed": (all(c.passed for c in checks) if checks else None)
        if not regressed
        else False,
    }


def run_to_dict(run: BenchmarkRun, *, full: bool = False) -> dict[str, Any]:
    """The API's and ``manage.py bench --json``'s shape of one run."""
    data: dict[str, Any] = {
        "id": run.pk,
        "cluster": run.cluster.name if run.cluster else None,
        "label": run.label,
        "sweep": run.sweep,
        "source": run.source,
        "target": run.target,
        "tool": run.tool,
        "tool_version": run.tool_version,
        "date": run.date.isoformat(),
        "max_concurrency": run.max_concurrency,
        "request_rate": run.request_rate,
        "input_len": run.input_len,
        "output_len": run.output_len,
        "npu_count": run.npu_count,
        "plan_digest": run.plan_digest,
        "engine_versions": run.engine_versions,
        "is_baseline": run.is_baseline,
        "duration": run.duration,
        "completed": run.completed,
        "failed": run.failed,
        "total_input_tokens": run.total_input_tokens,
        "total_output_tokens": run.total_output_tokens,
        "request_throughput": run.request_throughput,
        "request_goodput": run.request_goodput,
        "output_throughput": run.output_throughput,
        "total_token_throughput": run.total_token_throughput,
        "max_output_tokens_per_s": run.max_output_tokens_per_s,
        "max_concurrent_requests": run.max_concurrent_requests,
        "output_tps_per_npu": run.output_tps_per_npu,
        **run.latency_ms,
    }
    if full:
        data["verdict"] = verdict_of(run)
    return data
