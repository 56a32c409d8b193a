"""One round: read every node's sample into rows, move node states, store the round in
one transaction (batched bulk-creates) and publish one live event per cluster after commit."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from console.live import publish_many
from console.models import LinkMode, Node, NodeState
from console.models.inventory import NODE_STATE_COLORS
from console.services.evidence import evidence_on_engine_exit
from console.services.inventory import node_server_model_detected
from engine.link_loss import node_loss_reading
from monitoring.ingest.errors import RAW_KEEP, _err
from monitoring.ingest.sample import (
    NodeResult,
    ScrapeResult,
    _link_loss,
    _links_idle,
    _num,
    _parse_sample,
    _Parsed,
)
from monitoring.ingest.scrapes import _ingest_scrapes
from monitoring.ingest.staleness import node_staleness_update
from monitoring.models import (
    ChipSample,
    CollectRound,
    EngineSample,
    NodeLatest,
    NodeSample,
    SampleError,
    ScrapeState,
)


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


def _state_payload(
    node: Node, state: str, last_seen: datetime | None
) -> dict[str, Any]:
    # No translated label: the event is built once for every viewer; pages translate the state code.
    return {
        "state": state,
        "color": NODE_STATE_COLORS.get(state, "grey"),
        "last_seen": last_seen.timestamp() if last_seen else None,
    }


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
    rnd.nodes.append(_node_sample(rnd.now, node, parsed, engine_state, worst))
    rnd.latest.append(_node_latest(rnd.now, node, parsed, worst, loss_state))
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


def _node_sample(
    now: datetime, node: Node, parsed: _Parsed, engine_state: str, worst: float | None
) -> NodeSample:
    """The node's row of this round: host readings, engine state, worst HCCS loss, counts."""
    host = parsed.host
    return NodeSample(
        node_id=node.pk,
        ts=now,
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


def _node_latest(
    now: datetime, node: Node, parsed: _Parsed, worst: float | None, loss_state: str
) -> NodeLatest:
    """The node's latest sample as a whole (pages and the exporter read it)."""
    return NodeLatest(
        node_id=node.pk,
        ts=now,
        data={
            "collected_at": parsed.collected_at,
            "chips": parsed.chips,
            "hccs": parsed.hccs,
            "roce": parsed.roce,
            "host": parsed.host,
            "engine": parsed.engine,
            "errors": len(parsed.errors),
            "hccs_loss_pct": worst,
            "hccs_loss_state": loss_state,
            "hccs_unsupported": parsed.hccs_unsupported,
        },
    )


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
