"""1-minute rollups of raw samples and retention pruning (run by beat every minute)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, F, FloatField, Max, Min, QuerySet
from django.db.models.expressions import CombinedExpression, ExpressionWrapper, Value
from django.db.models.functions import NullIf
from django.utils import timezone

from monitoring.models import (
    ChipSample,
    CollectRound,
    EngineSample,
    NodeSample,
    Rollup,
    SampleError,
)

MAX_CATCH_UP_MIN = 180  # a console that was down catches up at most 3 h per run
HBM_PCT = ExpressionWrapper(
    CombinedExpression(
        Value(100.0) * F("hbm_used_mb"), "/", NullIf(F("hbm_total_mb"), Value(0.0))
    ),
    output_field=FloatField(),
)
CHIP_SERIES = {
    "temp_c": F("temp_c"),
    "hbm_pct": HBM_PCT,
    "aicore_pct": F("aicore_pct"),
    "power_w": F("power_w"),
    "hccs_loss_pct": F("hccs_loss_pct"),
}
NODE_SERIES = ("hccs_loss_pct", "roce_down")
ENGINE_SERIES = (
    "running",
    "waiting",
    "kv_cache_pct",
    "ttft_p50",
    "ttft_p99",
    "itl_p50",
    "itl_p99",
    "e2e_p99",
    "gen_tps",
    "prompt_tps",
)


def _floor_minute(ts: datetime) -> datetime:
    return ts.replace(second=0, microsecond=0)


def _next_minute_with_data(cursor: datetime | None) -> datetime | None:
    """The first minute at or after ``cursor`` that holds raw samples (None when there is none)."""
    firsts = []
    for model in (ChipSample, NodeSample, EngineSample):
        qs = (
            model.objects.all()
            if cursor is None
            else model.objects.filter(ts__gte=cursor)
        )
        first = qs.aggregate(m=Min("ts"))["m"]
        if first is not None:
            firsts.append(first)
    return _floor_minute(min(firsts)) if firsts else None


def _rows(
    qs: QuerySet[ChipSample] | QuerySet[NodeSample] | QuerySet[EngineSample],
    start: datetime,
) -> QuerySet:
    return qs.filter(ts__gte=start, ts__lt=start + timedelta(minutes=1))


def rollup_minute(start: datetime) -> int:
    """Aggregate one minute [start, start+60 s) of every series into Rollup rows; returns rows written."""
    out: list[Rollup] = []
    for series, expr in CHIP_SERIES.items():
        out += _minute_rollups(
            ChipSample.objects.all(),
            start,
            ("node_id", "npu", "chip"),
            f"chip.{series}",
            expr,
            lambda r: {"node_id": r["node_id"], "key": f"{r['npu']}.{r['chip']}"},
        )
    for series in NODE_SERIES:
        out += _minute_rollups(
            NodeSample.objects.all(),
            start,
            ("node_id",),
            f"node.{series}",
            series,
            lambda r: {"node_id": r["node_id"], "key": ""},
        )
    for series in ENGINE_SERIES:
        out += _minute_rollups(
            EngineSample.objects.all(),
            start,
            ("cluster_id", "engine"),
            f"engine.{series}",
            series,
            lambda r: {"cluster_id": r["cluster_id"], "key": r["engine"]},
        )
    Rollup.objects.bulk_create(out, batch_size=2000)
    return len(out)


def _minute_rollups(
    qs: QuerySet[ChipSample] | QuerySet[NodeSample] | QuerySet[EngineSample],
    start: datetime,
    group: tuple[str, ...],
    series: str,
    expr: Any,
    owner: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[Rollup]:
    """avg/max/n of ``expr`` per ``group`` over the minute; ``owner`` names each row's target and key."""
    agg = (
        _rows(qs, start)
        .values(*group)
        .annotate(avg=Avg(expr), max=Max(expr), n=Count("id"))
    )
    return [
        Rollup(
            **owner(r),
            series=series,
            minute=start,
            avg=r["avg"],
            max=r["max"],
            n=r["n"],
        )
        for r in agg
        if r["avg"] is not None
    ]


def rollup_and_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Roll up every finished minute not yet rolled up, then prune by retention. Returns counts."""
    now = now or timezone.now()
    # A round is stamped with its start time and ingested up to a deadline later: leave a margin.
    done_until = _floor_minute(now - timedelta(seconds=15))
    written = minutes = 0
    last = Rollup.objects.aggregate(m=Max("minute"))["m"]
    floor = done_until - timedelta(minutes=MAX_CATCH_UP_MIN)
    cursor: datetime | None = max(last + timedelta(minutes=1), floor) if last else floor
    while (start := _next_minute_with_data(cursor)) is not None and start < done_until:
        with transaction.atomic():
            written += rollup_minute(start)
        minutes += 1
        cursor = start + timedelta(minutes=1)
    raw_cutoff = now - timedelta(hours=settings.RAW_RETENTION_H)
    pruned = 0
    for model in (ChipSample, NodeSample, EngineSample, SampleError, CollectRound):
        field = "started_at" if model is CollectRound else "ts"
        pruned += model.objects.filter(**{f"{field}__lt": raw_cutoff}).delete()[0]
    pruned += Rollup.objects.filter(
        minute__lt=now - timedelta(days=settings.ROLLUP_RETENTION_D)
    ).delete()[0]
    return {"minutes": minutes, "rollups": written, "pruned": pruned}
