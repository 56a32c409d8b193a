"""The engines' /metrics scrapes of a round: ``EngineSample`` rows, ``ScrapeState``
(the counters the next window is derived from) and the clusters' live engine data."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from engine.parsers import ParseError
from engine.parsers.vllm_metrics import (
    CLUSTER,
    EngineSnapshot,
    EngineWindow,
    derive,
    parse_exposition,
)
from monitoring.ingest.errors import _err
from monitoring.ingest.sample import ScrapeResult, health_url
from monitoring.models import EngineSample, SampleError, ScrapeState

ENGINE_FIELDS = (
    "running",
    "waiting",
    "kv_cache_pct",
    "ttft_p50",
    "ttft_p95",
    "ttft_p99",
    "itl_p50",
    "itl_p95",
    "itl_p99",
    "e2e_p50",
    "e2e_p95",
    "e2e_p99",
    "prompt_tps",
    "gen_tps",
    "requests_ps",
    "prefix_hit_pct",
    "preemptions",
)


def _ingest_scrapes(
    scrapes: list[ScrapeResult],
    now: datetime,
    errors: list[SampleError],
    live: dict[int, dict[str, Any]],
) -> tuple[list[EngineSample], list[ScrapeState]]:
    """Per scrape: parse it, derive the windows since the last one, and return the
    ``EngineSample`` rows and the new ``ScrapeState`` rows; errors and live data are
    added to ``errors`` and ``live``."""
    rows: list[EngineSample] = []
    states: list[ScrapeState] = []
    prev_states = {
        s.cluster_id: s
        for s in ScrapeState.objects.filter(
            cluster_id__in=[s.cluster_id for s in scrapes]
        )
    }
    for scrape in scrapes:
        current = _exposition_read(scrape, now, errors, live)
        if current is None:
            continue
        windows = _windows_derive(scrape, current, prev_states.get(scrape.cluster_id))
        rows.extend(_engine_rows(scrape, windows, now))
        live[scrape.cluster_id]["engine"] = windows[CLUSTER].to_dict()
        live[scrape.cluster_id]["engines"] = sorted(k for k in windows if k != CLUSTER)
        if (
            scrape.health != 200
        ):  # /metrics answers, /health does not: a hung or dying engine
            errors.append(
                _err(
                    now,
                    f"GET {health_url(scrape.url)}",
                    f"HTTP {scrape.health}" if scrape.health else "no answer",
                    cluster_id=scrape.cluster_id,
                )
            )
        states.append(_scrape_state(scrape, current))
    return rows, states


def _exposition_read(
    scrape: ScrapeResult,
    now: datetime,
    errors: list[SampleError],
    live: dict[int, dict[str, Any]],
) -> dict[str, EngineSnapshot] | None:
    """The scrape's snapshots by engine label; None (the error noted) when there was no
    answer or it did not parse."""
    if scrape.text is None:
        errors.append(
            _err(
                now,
                f"GET {scrape.url}",
                scrape.error or "no answer",
                cluster_id=scrape.cluster_id,
            )
        )
        live[scrape.cluster_id]["engine_error"] = scrape.error or "no answer"
        return None
    try:
        return parse_exposition(scrape.text)
    except ParseError as exc:
        errors.append(
            _err(
                now,
                f"GET {scrape.url}",
                str(exc),
                scrape.text,
                cluster_id=scrape.cluster_id,
            )
        )
        live[scrape.cluster_id]["engine_error"] = str(exc)
        return None


def _windows_derive(
    scrape: ScrapeResult,
    current: dict[str, EngineSnapshot],
    prev: ScrapeState | None,
) -> dict[str, EngineWindow]:
    """The windows since the previous scrape of the same URL (rates need one; without it, none)."""
    prev_snaps = None
    window = None
    if prev is not None and prev.url == scrape.url:
        window = scrape.scraped_at - prev.scraped_at.timestamp()
        if window > 0:
            prev_snaps = {
                k: EngineSnapshot.from_dict(v) for k, v in prev.engines.items()
            }
    return derive(prev_snaps, current, window if prev_snaps else None)


def _engine_rows(
    scrape: ScrapeResult, windows: dict[str, EngineWindow], now: datetime
) -> list[EngineSample]:
    """One ``EngineSample`` per engine label (the cluster's whole and each DP rank)."""
    rows: list[EngineSample] = []
    for label, win in windows.items():
        values = {f: getattr(win, f) for f in ENGINE_FIELDS}
        rows.append(
            EngineSample(
                cluster_id=scrape.cluster_id,
                ts=now,
                engine=label[:16],
                success=win.success,
                **values,
            )
        )
    return rows


def _scrape_state(
    scrape: ScrapeResult, current: dict[str, EngineSnapshot]
) -> ScrapeState:
    """What the next round derives its windows from: this scrape's counters and time."""
    return ScrapeState(
        cluster_id=scrape.cluster_id,
        url=scrape.url,
        health_ok=scrape.health == 200,
        engines={k: v.to_dict() for k, v in current.items()},
        scraped_at=datetime.fromtimestamp(
            scrape.scraped_at, tz=timezone.get_current_timezone()
        ),
    )
