"""Ingest one poll round: every node's agent sample and every cluster's /metrics, in one transaction.

Rows are bulk-created (a few statements per round, whatever the node count); node
states move by conditional UPDATEs; one ``telemetry.update`` per cluster is
published after commit. A sample or exposition that cannot be read is stored as a
``SampleError`` with its raw text and never stops the rest of the round.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.live import publish_many
from console.models import LinkMode, Node, NodeState
from console.models.inventory import NODE_STATE_COLORS
from console.services.evidence import evidence_on_engine_exit
from console.services.inventory import node_server_model_detected
from engine.link_loss import node_loss_reading
from engine.parsers import ParseError
from engine.parsers.vllm_metrics import (
    CLUSTER,
    EngineSnapshot,
    derive,
    parse_exposition,
)
from monitoring.models import (
    ChipSample,
    CollectRound,
    EngineSample,
    NodeLatest,
    NodeSample,
    SampleError,
    ScrapeState,
)

RAW_KEEP = 4000
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


@dataclass
class NodeResult:
    """What one node's agent answered to ``node.collect`` (``sample``) or why it did not (``error``)."""

    node_id: int
    sample: dict[str, Any] | None = None
    error: str | None = (
        None  # agent raised; None with no sample = no answer before the deadline
    )


@dataclass
class ScrapeResult:
    """One GET of a cluster's engine ``/metrics``: the body, or the error."""

    cluster_id: int
    url: str
    scraped_at: float
    text: str | None = None
    error: str | None = None
    health: int | None = (
        None  # HTTP status of the same server's /health; None = no answer
    )


def health_url(metrics_url: str) -> str:
    """The /health of the API server whose /metrics is ``metrics_url``."""
    base = (
        metrics_url[: -len("/metrics")]
        if metrics_url.endswith("/metrics")
        else metrics_url
    )
    return f"{base}/health"


@dataclass
class RoundSummary:
    """Counts of one ingested round, and the per-cluster events published after commit."""

    nodes_total: int = 0
    nodes_ok: int = 0
    rows: int = 0
    errors: int = 0
    ingest_ms: float = 0.0
    state_changes: dict[str, str] = field(default_factory=dict)  # node name → new state
    events: dict[int, dict[str, Any]] = field(
        default_factory=dict
    )  # cluster id → payload


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    raise ValueError(f"{value!r} is not a number")


def _links_idle(prev_links: list[list[int]] | None, links: list[list[int]]) -> bool:
    """True when a usable previous sample shows no HCCS packet sent on any link since."""
    if not prev_links or len(prev_links) != len(links):
        return False
    return all(p[0] == c[0] for p, c in zip(prev_links, links, strict=True))


def _link_loss(
    prev_links: list[list[int]] | None, links: list[list[int]]
) -> float | None:
    """Worst link's (Δretries + Δerrors) / Δtx packets, in percent (100 when errors rise on a
    link that sends nothing); None without a usable previous sample."""
    if not prev_links or len(prev_links) != len(links):
        return None
    worst: float | None = None
    for (tx0, _rx0, rt0, er0), (tx1, _rx1, rt1, er1) in zip(
        prev_links, links, strict=True
    ):
        dtx, bad = tx1 - tx0, (rt1 - rt0) + (er1 - er0)
        if dtx < 0 or bad < 0:
            return None  # counters reset (driver reload): no window this round
        if dtx == 0:
            if bad == 0:
                continue  # idle link: no window
            loss = (
                100.0  # retries/CRC errors rising and nothing gets through: a dead link
            )
        else:
            loss = 100.0 * bad / dtx
        worst = loss if worst is None else max(worst, loss)
    return worst


@dataclass
class _Parsed:
    chips: list[dict[str, Any]]
    hccs: dict[str, dict[str, Any]]
    roce: list[dict[str, Any]]
    host: dict[str, Any]
    engine: dict[str, Any]
    errors: list[dict[str, Any]]
    collected_at: float | None
    hccs_unsupported: bool = False  # collect(): npu-smi has no -t hccs on this node
    server_model: dict[str, Any] | None = None  # asked for a never-detected node


def _parse_sample(sample: dict[str, Any]) -> _Parsed:
    """Check the agent's JSON shape and normalise it; raises ValueError naming what is wrong."""
    if not isinstance(sample, dict):
        raise ValueError(f"sample is a {type(sample).__name__}, not an object")
    chips_in = sample.get("chips")
    if not isinstance(chips_in, list):
        raise ValueError("sample has no chips list")
    chips = []
    for c in chips_in:
        chips.append(
            {
                "npu": int(c["npu"]),
                "chip": int(c["chip"]),
                "name": str(c.get("name") or ""),
                "health": str(c.get("health") or ""),
                "bus_id": str(c.get("bus_id") or ""),
                "temp_c": _num(c.get("temp_c")),
                "power_w": _num(c.get("power_w")),
                "aicore_pct": _num(c.get("aicore_pct")),
                "hbm_used_mb": _num(c.get("hbm_used_mb")),
                "hbm_total_mb": _num(c.get("hbm_total_mb")),
            }
        )
    hccs: dict[str, dict[str, Any]] = {}
    for h in sample.get("hccs") or []:
        links = [
            [
                int(lk["tx_packets"]),
                int(lk["rx_packets"]),
                int(lk["retry_count"]),
                int(lk["error_count"]),
            ]
            for lk in h["links"]
        ]
        hccs[f"{int(h['npu'])}.{int(h['chip'])}"] = {
            "health": h.get("health"),
            "links": links,
        }
    roce = []
    for p in sample.get("roce") or []:
        stat = p.get("stat") or {}
        link_stat = p.get("link_stat") or {}
        roce.append(
            {
                "npu": int(p["npu"]),
                "link": p.get("link"),
                "net_health": p.get("net_health"),
                "stat": {k: int(v) for k, v in stat.items()},
                "up_count": link_stat.get("up_count"),
                "down_count": link_stat.get("down_count"),
            }
        )
    host = sample.get("host") or {}
    errors = [e for e in sample.get("errors") or [] if isinstance(e, dict)]
    collected = sample.get("collected_at")
    return _Parsed(
        chips,
        hccs,
        roce,
        dict(host),
        dict(sample.get("engine") or {}),
        errors,
        float(collected) if isinstance(collected, int | float) else None,
        sample.get("hccs_unsupported") is True,
        sample["server_model"]
        if isinstance(sample.get("server_model"), dict)
        else None,
    )


def _state_payload(
    node: Node, state: str, last_seen: datetime | None
) -> dict[str, Any]:
    # No translated label: the event is built once for every viewer; pages translate the state code.
    return {
        "state": state,
        "color": NODE_STATE_COLORS.get(state, "grey"),
        "last_seen": last_seen.timestamp() if last_seen else None,
    }


def _err(
    ts: datetime,
    source: str,
    message: str,
    raw: str = "",
    *,
    node: Node | None = None,
    cluster_id: int | None = None,
) -> SampleError:
    return SampleError(
        ts=ts,
        node=node,
        cluster_id=cluster_id if node is None else node.cluster_id,
        source=source[:200],
        message=message,
        raw=raw[:RAW_KEEP],
    )


@dataclass
class _Round:
    """What one round writes and pushes, gathered node by node before one transaction."""

    now: datetime
    summary: RoundSummary
    chips: list[ChipSample] = field(default_factory=list)
    nodes: list[NodeSample] = field(default_factory=list)
    latest: list[NodeLatest] = field(default_factory=list)
    errors: list[SampleError] = field(default_factory=list)
    target_state: dict[str, list[int]] = field(
        default_factory=lambda: defaultdict(list)
    )
    live: dict[int, dict[str, Any]] = field(
        default_factory=lambda: defaultdict(lambda: {"nodes": {}, "engine": None})
    )
    exited: set[int] = field(
        default_factory=set
    )  # clusters whose running engine exited


def ingest_round(
    *,
    nodes: list[NodeResult],
    scrapes: list[ScrapeResult],
    started_at: datetime | None = None,
) -> RoundSummary:
    """Store one round, move node states, and publish one ``telemetry.update`` per cluster after commit.

    Every row of the round carries the round's time (the control side's clock), so
    series of different nodes share one x axis and agents' clock skew does not matter.
    """
    t0 = time.perf_counter()
    now = started_at or timezone.now()
    rnd = _Round(now=now, summary=RoundSummary(nodes_total=len(nodes)))
    by_id = {n.pk: n for n in Node.objects.filter(pk__in=[r.node_id for r in nodes])}
    prev_latest = {
        lt.node_id: lt.data for lt in NodeLatest.objects.filter(node_id__in=list(by_id))
    }
    for result in nodes:
        node = by_id.get(result.node_id)
        if node is None:
            continue  # deleted while the round ran
        parsed = _read_sample(rnd, node, result)
        if parsed is not None:
            prev_hccs = (prev_latest.get(node.pk) or {}).get("hccs") or {}
            _ingest_node(rnd, node, parsed, prev_hccs)
    engine_rows, scrape_states = _ingest_scrapes(scrapes, now, rnd.errors, rnd.live)
    _store_round(rnd, engine_rows, scrape_states, by_id, t0)
    return rnd.summary


def _read_sample(rnd: _Round, node: Node, result: NodeResult) -> _Parsed | None:
    """The node's sample, parsed, with the agent's own errors recorded; None (recorded) when unreadable."""
    if result.sample is None:
        if result.error:
            rnd.errors.append(_err(rnd.now, "node.collect", result.error, node=node))
        return None
    try:
        parsed = _parse_sample(result.sample)
    except (KeyError, TypeError, ValueError) as exc:
        raw = (
            json.dumps(result.sample, default=str)[:RAW_KEEP]
            if not isinstance(result.sample, str)
            else result.sample
        )
        rnd.errors.append(
            _err(
                rnd.now,
                "node.collect",
                f"unreadable sample from {node.name}: {exc!r}",
                raw,
                node=node,
            )
        )
        return None
    rnd.summary.nodes_ok += 1
    for e in parsed.errors:
        rnd.errors.append(
            _err(
                rnd.now,
                str(e.get("source", "agent")),
                str(e.get("message", "")),
                str(e.get("raw") or ""),
                node=node,
            )
        )
    return parsed


def _chip_rows(
    rnd: _Round, node: Node, parsed: _Parsed, prev_hccs: dict[str, Any]
) -> tuple[float | None, list[list[Any]]]:
    """One ChipSample per chip, HCCS loss since the previous round; (worst loss, live rows)."""
    chips_live = []
    worst: float | None = None
    idle_chips = 0
    for c in parsed.chips:
        key = f"{c['npu']}.{c['chip']}"
        h = parsed.hccs.get(key)
        prev_links = (prev_hccs.get(key) or {}).get("links")
        loss = _link_loss(prev_links, h["links"]) if h else None
        if h is not None:
            h["loss_pct"] = loss
        if loss is not None:
            worst = loss if worst is None else max(worst, loss)
        elif h is not None and _links_idle(prev_links, h["links"]):
            idle_chips += 1
        rnd.chips.append(
            ChipSample(
                node_id=node.pk,
                ts=rnd.now,
                npu=c["npu"],
                chip=c["chip"],
                health=c["health"][:16],
                temp_c=c["temp_c"],
                power_w=c["power_w"],
                aicore_pct=c["aicore_pct"],
                hbm_used_mb=c["hbm_used_mb"],
                hbm_total_mb=c["hbm_total_mb"],
                hccs_loss_pct=loss,
            )
        )
        hbm_pct = (
            100.0 * c["hbm_used_mb"] / c["hbm_total_mb"]
            if c["hbm_used_mb"] is not None and c["hbm_total_mb"]
            else None
        )
        chips_live.append(
            [
                c["npu"],
                c["chip"],
                c["temp_c"],
                hbm_pct,
                c["aicore_pct"],
                c["health"],
                c["power_w"],  # [6] power panel
                loss,  # [7] HCCS loss of this chip's worst link (per-chip panel)
            ]
        )
    if worst is None and idle_chips and node.link_mode == LinkMode.ROCE:
        # The node's intra-server traffic moved to RoCE and HCCS carried nothing, so it
        # lost nothing: 0 %, and the HCCS-loss alert resolves after a failover. On a
        # node still on HCCS, idle links (an engine restarting) say nothing: no value,
        # so the alert neither resolves nor flaps while the remedy is still running.
        worst = 0.0
    return worst, chips_live


def _ingest_node(
    rnd: _Round, node: Node, parsed: _Parsed, prev_hccs: dict[str, Any]
) -> None:
    """The node's rows (chips, node sample, latest), its next state and its live event."""
    if parsed.server_model is not None and not node.detected_server_model:
        node_server_model_detected(node=node, detection=parsed.server_model)
    worst, chips_live = _chip_rows(rnd, node, parsed, prev_hccs)
    # measured / no_traffic / unsupported / no_baseline / reset (engine/link_loss.py)
    loss_state = node_loss_reading(
        prev_hccs, parsed.hccs, hccs_unsupported=parsed.hccs_unsupported
    ).state
    engine_state = str(parsed.engine.get("state") or "")
    host = parsed.host
    rnd.nodes.append(
        NodeSample(
            node_id=node.pk,
            ts=rnd.now,
            cpu_pct=_num(host.get("cpu_pct")),
            mem_used_pct=_num(host.get("mem_used_pct")),
            load1=_num(host.get("load1")),
            disk_free_gb=_num(host.get("disk_free_gb")),
            engine_rss_mb=_num(host.get("engine_rss_mb")),
            engine_state=engine_state[:16],
            hccs_loss_pct=worst,
            roce_down=sum(1 for p in parsed.roce if p["link"] not in ("UP", None)),
            errors=min(len(parsed.errors), 32767),
        )
    )
    rnd.latest.append(
        NodeLatest(
            node_id=node.pk,
            ts=rnd.now,
            data={
                "collected_at": parsed.collected_at,
                "chips": parsed.chips,
                "hccs": parsed.hccs,
                "roce": parsed.roce,
                "host": host,
                "engine": parsed.engine,
                "errors": len(parsed.errors),
                "hccs_loss_pct": worst,
                "hccs_loss_state": loss_state,
                "hccs_unsupported": parsed.hccs_unsupported,
            },
        )
    )
    if engine_state == "exited" and node.state == NodeState.RUNNING:
        rnd.exited.add(node.cluster_id or 0)
    new_state = NodeState.RUNNING if engine_state == "running" else NodeState.READY
    rnd.target_state[new_state].append(node.pk)
    if node.cluster_id is not None:
        shown = new_state if node.state != NodeState.OUT_OF_SERVICE else node.state
        rnd.live[node.cluster_id]["nodes"][node.name] = {
            **_state_payload(node, shown, rnd.now),
            "engine_state": engine_state,
            "hccs_loss_pct": worst,
            "hccs_loss_state": loss_state,
            "roce_down": sum(1 for p in parsed.roce if p.get("link") == "DOWN"),
            "chips": chips_live,
            "errors": len(parsed.errors),
        }
    if node.state != new_state and node.state != NodeState.OUT_OF_SERVICE:
        rnd.summary.state_changes[node.name] = new_state


def _store_round(
    rnd: _Round,
    engine_rows: list[EngineSample],
    scrape_states: list[ScrapeState],
    by_id: dict[int, Node],
    t0: float,
) -> None:
    """Write the round in one transaction; publish its events after commit."""
    now, summary = rnd.now, rnd.summary
    with transaction.atomic():
        ChipSample.objects.bulk_create(rnd.chips, batch_size=2000)
        NodeSample.objects.bulk_create(rnd.nodes, batch_size=2000)
        EngineSample.objects.bulk_create(engine_rows)
        SampleError.objects.bulk_create(rnd.errors, batch_size=500)
        NodeLatest.objects.bulk_create(
            rnd.latest,
            batch_size=500,
            update_conflicts=True,
            unique_fields=["node"],
            update_fields=["ts", "data"],
        )
        ScrapeState.objects.bulk_create(
            scrape_states,
            update_conflicts=True,
            unique_fields=["cluster"],
            update_fields=["url", "scraped_at", "engines", "health_ok"],
        )
        for state, ids in rnd.target_state.items():
            # Conditional UPDATE: an operator's out-of-service mark always wins over telemetry.
            Node.objects.filter(pk__in=ids).exclude(
                state=NodeState.OUT_OF_SERVICE
            ).update(state=state, last_seen_at=now)
        for name, state in node_staleness_update(now=now).items():
            summary.state_changes[name] = state
        summary.rows = len(rnd.chips) + len(rnd.nodes) + len(engine_rows)
        summary.errors = len(rnd.errors)
        summary.ingest_ms = (time.perf_counter() - t0) * 1000
        CollectRound.objects.create(
            started_at=now,
            finished_at=timezone.now(),
            nodes_total=summary.nodes_total,
            nodes_ok=summary.nodes_ok,
            rows=summary.rows,
            ingest_ms=summary.ingest_ms,
        )
        _add_missing_nodes(rnd.live, by_id, now)
        summary.events = {
            cid: {"cluster": cid, "ts": now.timestamp(), **payload}
            for cid, payload in rnd.live.items()
        }
        transaction.on_commit(lambda: _publish(summary.events))
        evidence_on_engine_exit(rnd.exited)  # issue 19: every node's logs, after commit


def _add_missing_nodes(
    live: dict[int, dict[str, Any]], by_id: dict[int, Node], now: datetime
) -> None:
    """Nodes that sent nothing this round still appear in the event, with their (maybe new) state and last-seen time."""
    missing = [
        n
        for n in by_id.values()
        if n.cluster_id is not None and n.name not in live[n.cluster_id]["nodes"]
    ]
    if not missing:
        return
    fresh = {n.pk: n for n in Node.objects.filter(pk__in=[n.pk for n in missing])}
    for node in missing:
        current = fresh.get(node.pk, node)
        assert node.cluster_id is not None  # filtered above
        live[node.cluster_id]["nodes"][node.name] = {
            **_state_payload(current, current.state, current.last_seen_at),
            "chips": None,
        }


def _publish(events: dict[int, dict[str, Any]]) -> None:
    publish_many(
        [
            (f"cluster-{cluster_id}", "telemetry.update", payload)
            for cluster_id, payload in events.items()
        ]
    )


def _ingest_scrapes(
    scrapes: list[ScrapeResult],
    now: datetime,
    errors: list[SampleError],
    live: dict[int, dict[str, Any]],
) -> tuple[list[EngineSample], list[ScrapeState]]:
    rows: list[EngineSample] = []
    states: list[ScrapeState] = []
    prev_states = {
        s.cluster_id: s
        for s in ScrapeState.objects.filter(
            cluster_id__in=[s.cluster_id for s in scrapes]
        )
    }
    for scrape in scrapes:
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
            continue
        try:
            current = parse_exposition(scrape.text)
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
            continue
        prev = prev_states.get(scrape.cluster_id)
        prev_snaps = None
        window = None
        if prev is not None and prev.url == scrape.url:
            window = scrape.scraped_at - prev.scraped_at.timestamp()
            if window > 0:
                prev_snaps = {
                    k: EngineSnapshot.from_dict(v) for k, v in prev.engines.items()
                }
        windows = derive(prev_snaps, current, window if prev_snaps else None)
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
        states.append(
            ScrapeState(
                cluster_id=scrape.cluster_id,
                url=scrape.url,
                health_ok=scrape.health == 200,
                engines={k: v.to_dict() for k, v in current.items()},
                scraped_at=datetime.fromtimestamp(
                    scrape.scraped_at, tz=timezone.get_current_timezone()
                ),
            )
        )
    return rows, states


def node_staleness_update(*, now: datetime | None = None) -> dict[str, str]:
    """Mark nodes without a sample for STALE_AFTER_S stale and for UNREACHABLE_AFTER_S unreachable.

    Conditional UPDATEs only move nodes forward (ready/running → stale → unreachable);
    out-of-service and never-seen nodes are left alone. Returns {node name: new state}.
    """
    now = now or timezone.now()
    changed: dict[str, str] = {}
    steps = (
        (
            NodeState.UNREACHABLE,
            timedelta(seconds=settings.UNREACHABLE_AFTER_S),
            (NodeState.READY, NodeState.RUNNING, NodeState.STALE, NodeState.UNKNOWN),
        ),
        (
            NodeState.STALE,
            timedelta(seconds=settings.STALE_AFTER_S),
            (NodeState.READY, NodeState.RUNNING, NodeState.UNKNOWN),
        ),
    )
    for state, after, from_states in steps:
        qs = Node.objects.filter(last_seen_at__lt=now - after, state__in=from_states)
        names = list(qs.values_list("name", flat=True))
        if names:
            Node.objects.filter(name__in=names, state__in=from_states).update(
                state=state
            )
            changed.update(dict.fromkeys(names, str(state)))
    return changed
