"""Remedies: verify an HCCS → RoCE switch on the counters; replace a node with an idle spare."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction

from console.engine_auth import engine_headers
from console.models import Node, NodeRole, NodeState
from console.models.operations import (
    OperationStep,
    StepState,
)
from console.selectors import spare_for
from console.services.agents import AgentUnreachable
from console.services.runbooks.base import Run

# -- failover verification -----------------------------------------------------------


def link_counters(sample: dict[str, Any]) -> tuple[int, int]:
    """(HCCS tx+rx packets over every link, RoCE tx+rx packets over every port) of one node.collect answer."""
    hccs = sum(
        int(lk["tx_packets"]) + int(lk["rx_packets"])
        for h in sample.get("hccs") or []
        for lk in h["links"]
    )
    roce = sum(
        int((p.get("stat") or {}).get(k, 0))
        for p in sample.get("roce") or []
        for k in ("roce_tx_all_pkt_num", "roce_rx_all_pkt_num")
    )
    return hccs, roce


def verify_link_switch(run: Run, step: OperationStep, node_name: str) -> None:
    """With traffic flowing, the node's HCCS counters must stand still and its RoCE counters grow.

    Whether HCCL honours HCCL_INTRA_ROCE_ENABLE depends on hardware, CANN version and the
    operator path, so this is measured, not assumed. A failed verification is a warning on
    the step and ``result['verification']['ok'] = False``: the engine is healthy, but the
    incident moves on to its second remedy.
    """
    run.begin(step)
    node = next(n for n in run.nodes if n.name == node_name)
    window = float(settings.FAILOVER_VERIFY_S)
    stop = threading.Event()
    url = f"{run.head_url()}/v1/completions"
    body = {
        "model": run.cluster.profile.served_model_name,
        "prompt": "Verify the link switch.",
        "max_tokens": 32,
    }

    def traffic() -> None:
        with httpx.Client(
            timeout=30, headers=engine_headers(run.cluster.name)
        ) as client:
            while not stop.is_set():
                try:
                    client.post(url, json=body)
                except httpx.HTTPError:
                    stop.wait(0.2)

    threads = [threading.Thread(target=traffic, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(min(1.0, window / 4))  # traffic under way before the first reading
        for attempt in range(2):
            first = run.call(node, "node.collect")
            time.sleep(window)
            second = run.call(node, "node.collect")
            (h0, r0), (h1, r1) = (
                link_counters(first),
                link_counters(second),
            )
            hccs_delta, roce_delta = h1 - h0, r1 - r0
            if hccs_delta or roce_delta or attempt:
                break
            window *= 2  # nothing moved on either link: the window was too short to see traffic
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=35)
    # ok: True = switched, False = HCCS still carries traffic, None = no traffic seen at all
    ok: bool | None = (
        True if hccs_delta == 0 and roce_delta > 0 else (False if hccs_delta else None)
    )
    detail = (
        f"over {window:g} s on {node_name}: HCCS tx+rx +{hccs_delta} packets, RoCE tx+rx +{roce_delta} packets"
        + (
            ""
            if ok
            else (
                " — HCCS still carries traffic"
                if ok is False
                else " — no packet on either link: inconclusive (is traffic reaching this node?)"
            )
        )
    )
    run.result["verification"] = {
        "ok": ok,
        "node": node_name,
        "window_s": window,
        "hccs_delta": hccs_delta,
        "roce_delta": roce_delta,
        "detail": detail,
    }
    run.finish(
        step,
        detail,
        state=StepState.SUCCEEDED if ok else StepState.WARNING,
        data=run.result["verification"],
    )


# -- replace a node with a spare ------------------------------------------------------


def replace_prepare(run: Run) -> None:
    """Pick the spare for params['node'] (or params['spare']) into ``run.replace``; the new rank list."""
    step = run.add_step("Choose an idle spare of the same hardware")
    run.begin(step)
    name = run.op.params.get("node")
    old = next((n for n in run.nodes if n.name == name), None)
    if old is None:
        raise run.fail(step, f"{name!r} is not a node of {run.cluster.name}")
    wanted = run.op.params.get("spare")
    spare = (
        Node.objects.filter(
            name=wanted, cluster__isnull=True, role=NodeRole.SPARE
        ).first()
        if wanted
        else spare_for(old)
    )
    if spare is None:
        raise run.fail(
            step,
            f"no idle spare with {old.npu_count} × {old.npu_model} ({old.hbm_per_npu_gb} GB) for {old.name}",
        )
    run.finish(step, f"{spare.name} takes rank {old.rank} from {old.name}")
    new_nodes = [spare if n.pk == old.pk else n for n in run.nodes]
    spare.rank, spare.role = (
        old.rank,
        old.role,
    )  # in memory only, for the plan and the steps
    run.result["replace"] = {
        "old": old.name,
        "spare": spare.name,
        "rank": old.rank,
    }
    run.replace = {
        "old": old,
        "spare": spare,
        "old_nodes": list(run.nodes),
        "new_nodes": new_nodes,
        "swapped": False,
    }


def replace_spare_preflight(run: Run, step: OperationStep) -> None:
    """The spare's own checks pass before anything running is touched."""
    assert run.replace is not None
    spare = run.replace["spare"]
    run.begin(step)
    head = run.nodes[0]
    try:
        answer = run.call(
            spare,
            "node.preflight",
            timeout=settings.PREFLIGHT_TIMEOUT_S,
            expected_npus=spare.npu_count,
            host_ip=spare.management_ip,
            ports=[spare.api_port, spare.rpc_port] if spare.rank == 0 else [],
            model_path=run.cluster.profile.model_path,
            ping_targets=list(head.npu_ips or []) if head.pk != spare.pk else [],
        )
    except AgentUnreachable as exc:
        raise run.fail(step, f"{spare.name}: {exc}") from None
    failed = [c for c in answer["checks"] if c["status"] == "fail"]
    if failed:
        raise run.fail(
            step,
            "; ".join(f"{c['name']}: {c['evidence']}" for c in failed),
            data={"checks": answer["checks"]},
        )
    run.finish(
        step,
        f"{len(answer['checks'])} checks passed",
        data={"checks": answer["checks"]},
    )


def replace_swap(run: Run, step: OperationStep) -> None:
    """The spare takes the old node's rank and role; the old node leaves the cluster, out of service."""
    replace = run.replace
    assert replace is not None
    old, spare = replace["old"], replace["spare"]
    run.begin(step)
    with transaction.atomic():
        Node.objects.filter(pk=old.pk).update(
            cluster=None,
            rank=None,
            role=NodeRole.SPARE,
            state=NodeState.OUT_OF_SERVICE,
            link_mode_reason=f"replaced by {spare.name} (operation #{run.op.pk})"[:300],
        )
        Node.objects.filter(pk=spare.pk).update(
            cluster=run.cluster,
            rank=old.rank,
            role=old.role,
            state=NodeState.READY,
        )
    replace["swapped"] = True
    run.nodes = run.cluster.ranked_nodes()
    run.finish(
        step,
        f"{spare.name} is rank {old.rank}; {old.name} is out of service until re-admitted",
    )


def replace_undo(run: Run) -> None:
    """A failed replacement puts the inventory back as it was."""
    replace = run.replace
    if not replace or not replace.get("swapped"):
        return
    old, spare = replace["old"], replace["spare"]
    with transaction.atomic():
        Node.objects.filter(pk=spare.pk).update(
            cluster=None, rank=None, role=NodeRole.SPARE, state=NodeState.READY
        )
        Node.objects.filter(pk=old.pk).update(
            cluster=run.cluster,
            rank=old.rank,
            role=old.role,
            state=NodeState.READY,
        )
    replace["swapped"] = False
    run.add_step(
        f"Roll back: {old.name} back at rank {old.rank}, {spare.name} back to spare"
    )
