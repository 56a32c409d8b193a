"""Beat tasks (thin): one collection round for ALL nodes, and the rollup/prune housekeeping."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import redis
from celery.exceptions import TimeoutError as CeleryTimeoutError
from celery.result import AsyncResult
from django.conf import settings
from django.utils import timezone

from console.celery import app, node_queue
from console.services.agents import result_wait
from monitoring import selectors
from monitoring.alerts.tasks import alerts_evaluate_task
from monitoring.ingest import (
    NodeResult,
    RoundSummary,
    ScrapeResult,
    health_url,
    ingest_round,
)
from monitoring.rollup import rollup_and_prune
from monitoring.selectors import CollectTarget
from monitoring.store import redis_client

SCRAPE_TIMEOUT_S = 3.0


def scrape_metrics(
    cluster_id: int, url: str, timeout: float = SCRAPE_TIMEOUT_S
) -> ScrapeResult:
    """GET one engine ``/metrics`` and the same server's ``/health``; never raises (the
    error goes into the result). An engine can keep serving /metrics while /health fails
    (its core engine dead or hung), so the alert needs both."""
    started = time.time()
    try:
        health: int | None = httpx.get(health_url(url), timeout=timeout).status_code
    except httpx.HTTPError:
        health = None
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        return ScrapeResult(
            cluster_id,
            url,
            started,
            error=f"{type(exc).__name__}: {exc}"[:500],
            health=health,
        )
    if response.status_code != 200:
        return ScrapeResult(
            cluster_id,
            url,
            started,
            error=f"HTTP {response.status_code}: {response.text[:200]}",
            health=health,
        )
    return ScrapeResult(cluster_id, url, started, text=response.text, health=health)


INFLIGHT_KEY = "monitoring:collect:inflight"  # Redis hash "<node pk>:<name>" → {"id": task id, "sent": epoch}
ROUND_LOCK_KEY = "monitoring:collect:round"


def collect_all(
    deadline_s: float | None = None,
) -> tuple[list[NodeResult], list[ScrapeResult]]:
    """Send ``node.collect`` to every node's queue at once, scrape every serving cluster meanwhile,
    then gather what came back before the deadline.

    A node whose previous collect is still running is not asked again: its answer is
    picked up by whichever round finds it ready (so a 1 s interval works with agents
    that need 3 s), and a collect older than STALE_AFTER_S is given up (a missed sample).
    """
    deadline_s = settings.COLLECT_DEADLINE_S if deadline_s is None else deadline_s
    targets = selectors.collect_targets()
    deadline = time.monotonic() + deadline_s
    store = redis_client()
    wanted = {f"{n.pk}:{n.name}": n for n in targets.nodes}
    inflight = _inflight_still_wanted(store, wanted)
    _collects_send(store, inflight, wanted)
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(targets.scrapes)))) as pool:
        timeout = min(SCRAPE_TIMEOUT_S, max(deadline_s, 1.0))
        futures: list[Future[ScrapeResult]] = [
            pool.submit(scrape_metrics, cid, url, timeout)
            for cid, url in targets.scrapes
        ]
        results = _collects_gather(store, inflight, deadline)
        scrapes = [f.result() for f in futures]
    return results, scrapes


def _inflight_still_wanted(
    store: redis.Redis, wanted: dict[str, CollectTarget]
) -> dict[str, dict[str, Any]]:
    """The collects earlier rounds sent and nobody gathered yet, minus stale or unwanted ones (forgotten)."""
    now = time.time()
    inflight: dict[str, dict[str, Any]] = {
        (k.decode() if isinstance(k, bytes) else k): json.loads(v)
        for k, v in store.hgetall(INFLIGHT_KEY).items()
    }
    for key in [
        k
        for k, v in inflight.items()
        if k not in wanted or now - v["sent"] > settings.STALE_AFTER_S
    ]:
        AsyncResult(inflight.pop(key)["id"], app=app).forget()
        store.hdel(INFLIGHT_KEY, key)
    return inflight


def _collects_send(
    store: redis.Redis,
    inflight: dict[str, dict[str, Any]],
    wanted: dict[str, CollectTarget],
) -> None:
    """Ask every wanted node without a collect in flight; remember each in Redis and ``inflight``."""
    now = time.time()
    for key, node in wanted.items():
        if key in inflight:
            continue
        queue = node.agent_queue or node_queue(node.name)
        # expires: a collect nobody picked up while it still mattered must not run later.
        sent = app.send_task(
            "node.collect",
            kwargs={
                "node": node.name,
                "model_path": node.model_path,
                **({"detect_server_model": True} if node.detect_model else {}),
            },
            queue=queue,
            expires=float(settings.STALE_AFTER_S),
        )
        inflight[key] = {"id": sent.id, "sent": now}
        store.hset(INFLIGHT_KEY, key, json.dumps(inflight[key]))


def _collects_gather(
    store: redis.Redis, inflight: dict[str, dict[str, Any]], deadline: float
) -> list[NodeResult]:
    """Every in-flight collect's answer or error by the deadline; one still running stays in flight."""
    results: list[NodeResult] = []
    for key, entry in inflight.items():
        node_id = int(key.split(":", 1)[0])
        async_result = AsyncResult(entry["id"], app=app)
        try:
            sample = result_wait(async_result, max(0.01, deadline - time.monotonic()))
            results.append(NodeResult(node_id, sample=sample))
        except (TimeoutError, CeleryTimeoutError):
            results.append(NodeResult(node_id))
            continue  # still running: a later round picks it up
        except Exception as exc:  # the agent's own error (e.g. a tool it cannot run) is a recorded error
            results.append(
                NodeResult(node_id, error=f"{type(exc).__name__}: {exc}"[:1000])
            )
        store.hdel(INFLIGHT_KEY, key)
        async_result.forget()
    return results


@app.task(name="monitoring.collect_round", ignore_result=True)
def collect_round_task() -> dict[str, Any]:
    """One poll round: collect from every node, ingest in one transaction, publish per cluster."""
    store = redis_client()
    # One round at a time: with a 1 s interval a slow round makes the next ticks skip, not pile up.
    if not store.set(
        ROUND_LOCK_KEY,
        "1",
        nx=True,
        ex=int(settings.COLLECT_DEADLINE_S + SCRAPE_TIMEOUT_S + 30),
    ):
        return {"skipped": 1}
    try:
        started = timezone.now()
        nodes, scrapes = collect_all()
        summary: RoundSummary = ingest_round(
            nodes=nodes, scrapes=scrapes, started_at=started
        )
    finally:
        store.delete(ROUND_LOCK_KEY)
    alerts_evaluate_task.delay(started.timestamp())  # rules see this round's samples
    return {
        "nodes": summary.nodes_total,
        "ok": summary.nodes_ok,
        "rows": summary.rows,
        "ms": round(summary.ingest_ms, 1),
    }


@app.task(name="monitoring.rollup_and_prune", ignore_result=True)
def rollup_and_prune_task() -> dict[str, int]:
    """1-minute rollups of finished minutes, then drop raw rows past RAW_RETENTION_H and rollups past ROLLUP_RETENTION_D."""
    return rollup_and_prune()
