"""Remedies: verify an HCCS → RoCE switch on the counters (a verdict that can fail); replace a node with an idle spare."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction

from console.constants import HCCS_LOSS_MAX_PCT
from console.engine_auth import engine_headers
from console.models import Node, NodeRole, NodeState
from console.models.operations import (
    OperationStep,
    StepState,
)
from console.opschecks import check
from console.opsmessages import message
from console.selectors import spare_for
from console.services.agents import AgentUnreachable
from console.services.inventory import node_server_model_detected
from console.services.runbooks.base import Run
from engine.checktext import join
from engine.link_verify import failing_links, hccs_rate, roce_rate
from engine.link_verify import verify_link_switch as link_verify_switch

# the verify-switch step's summary per verdict (English "{status}: {reason}")
VERIFY_SUMMARY = {
    "switched": "summary.verify_switched",
    "not_switched": "summary.verify_not_switched",
    "cannot_verify": "summary.verify_cannot",
}


def verify_summary(status: str, reason: str) -> dict[str, Any]:
    """The verify-switch step's summary ("{status}: {reason}" in English)."""
    return message(
        VERIFY_SUMMARY.get(status, "summary.verify_not_switched"), reason=reason
    )


# -- failover verification -----------------------------------------------------------
#
# The verdict is engine.link_verify.verify_link_switch: the node's own HCCS packet rate
# before the change (its baseline) against the rate after, with the peers' rates showing
# that traffic flowed. RoCE counters are never the evidence (expert-parallel all-to-all
# between servers grows them anyway), and "cannot verify" (counters unsupported or empty,
# no traffic) is never a pass: the incident takes the next remedy or escalates.


# A window with no HCCS sample at all: what the verdict gets when no baseline was taken.
NO_BASELINE: tuple[dict[str, Any], dict[str, Any]] = (
    {"collected_at": 0.0, "hccs": []},
    {"collected_at": 0.0, "hccs": []},
)


@contextmanager
def _traffic(run: Run) -> Iterator[None]:
    """Requests through the engine while the counters are read (loss is a rate over traffic)."""
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
        time.sleep(min(1.0, float(settings.FAILOVER_VERIFY_S) / 4))
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=35)


def _windows(
    run: Run, nodes: list[Node]
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Two node.collect samples of each node, FAILOVER_VERIFY_S apart, under traffic."""
    window = float(settings.FAILOVER_VERIFY_S)
    with _traffic(run):
        first = {n.name: run.call(n, "node.collect") for n in nodes}
        time.sleep(window)
        second = {n.name: run.call(n, "node.collect") for n in nodes}
    return {name: (first[name], second[name]) for name in first}


def _summary(window: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    """What the step keeps of a window: the rates, not the whole samples."""
    return {
        "hccs_pps": hccs_rate(window),
        "roce_pps": roce_rate(window),
        "hccs_unsupported": any(s.get("hccs_unsupported") for s in window),
        "hccs_links": sum(
            len(c.get("links") or []) for c in window[1].get("hccs") or []
        ),
    }


def link_baseline(run: Run, step: OperationStep, node_name: str) -> None:
    """Before the change: the node's HCCS rate under traffic, the verdict's baseline."""
    run.begin(step)
    node = next(n for n in run.nodes if n.name == node_name)
    window = _windows(run, [node])[node_name]
    run.link_baseline = window
    summary = _summary(window)
    rate = summary["hccs_pps"]
    run.finish(
        step,
        message("summary.hccs_baseline", node=node_name, rate=f"{rate:.0f}")
        if rate is not None
        else message("summary.hccs_no_counters", node=node_name),
        state=StepState.SUCCEEDED if rate is not None else StepState.WARNING,
        data=summary,
    )


def verify_link_switch(run: Run, step: OperationStep, node_name: str) -> None:
    """After the engine restarted with the RoCE pair on every rank: did the node's
    intra-server traffic leave HCCS? ``run.result['verification']`` holds the verdict
    (engine.link_verify.LinkVerdict.to_dict(): ok, status, reason, evidence); anything
    but ``switched`` is a warning on the step, and the incident moves on."""
    run.begin(step)
    node = next(n for n in run.nodes if n.name == node_name)
    windows = _windows(run, list(run.nodes))
    before = run.link_baseline or NO_BASELINE  # none taken: nothing to compare with
    verdict = link_verify_switch(
        before,
        windows[node_name],
        [w for name, w in windows.items() if name != node.name],
    )
    run.result["verification"] = {
        **verdict.to_dict(),
        "node": node_name,
        "window_s": float(settings.FAILOVER_VERIFY_S),
        "detail": verdict.reason,
    }
    run.finish(
        step,
        verify_summary(verdict.status, verdict.reason),
        state=StepState.SUCCEEDED if verdict.ok else StepState.WARNING,
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
        raise run.fail(
            step,
            message("summary.not_a_node", name=repr(name), cluster=run.cluster.name),
        )
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
            message(
                "summary.no_spare",
                count=old.npu_count,
                model=old.npu_model,
                hbm=old.hbm_per_npu_gb,
                node=old.name,
            ),
        )
    run.finish(
        step,
        message("summary.spare_takes", spare=spare.name, rank=old.rank, old=old.name),
    )
    new_nodes = [spare if n.pk == old.pk else n for n in run.nodes]
    # in memory only, for the plan and the steps; the spare runs the engine's link pair
    # (every rank carries the same HCCL_INTRA_* pair: engine.plans.link_pair_errors)
    spare.rank, spare.role, spare.link_mode = old.rank, old.role, old.link_mode
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
    checks = list(answer["checks"])
    if isinstance(answer.get("server_model"), dict):
        spare = node_server_model_detected(node=spare, detection=answer["server_model"])
        old = run.replace["old"]
        want = old.effective_server_model
        if spare.effective_server_model != want:
            # the engine's ranks keep one link layout (engine.capabilities remedies_for)
            checks.append(
                check(
                    "server_model.spare_differs",
                    "fail",
                    spare=spare.name,
                    model=spare.effective_server_model,
                    old=old.name,
                    want=want,
                )
            )
    failed = [c for c in checks if c["status"] == "fail"]
    if failed:  # the page rebuilds this from the checks in the reader's language
        raise run.fail(
            step,
            "; ".join(f"{c['name']}: {c['evidence']}" for c in failed),
            data={"checks": checks},
        )
    run.finish(
        step,
        message("summary.checks_passed", count=len(checks)),
        data={"checks": checks},
    )


def record_failed_links(run: Run, step: OperationStep) -> None:
    """Before the node's engine stops: which of its HCCS links lose packets under
    traffic (at least the HCCS loss alert's threshold). Re-admission checks exactly
    these later; none measurable (no traffic, counters unsupported) is said as such."""
    assert run.replace is not None
    old = run.replace["old"]
    run.begin(step)
    window = _windows(run, [old])[old.name]
    links = failing_links(window, HCCS_LOSS_MAX_PCT)
    summary = _summary(window)
    evidence = {
        **summary,
        "operation": run.op.pk,
        "threshold_pct": HCCS_LOSS_MAX_PCT,
        "at": time.time(),
    }
    Node.objects.filter(pk=old.pk).update(
        failed_links=[list(k) for k in links], failed_links_evidence=evidence
    )
    if links:
        run.finish(
            step,
            message(
                "summary.links_lose",
                node=old.name,
                count=len(links),
                pct=f"{HCCS_LOSS_MAX_PCT:g}",
                links=join(
                    [
                        message("summary.npu_link", npu=n, chip=c, link=i)
                        for n, c, i in links[:8]
                    ],
                    ", ",
                ),
            ),
            data={"failed_links": [list(k) for k in links]},
        )
    else:
        run.finish(
            step,
            message(
                "summary.no_link_measured", node=old.name, pct=f"{HCCS_LOSS_MAX_PCT:g}"
            ),
            state=StepState.WARNING,
            data=summary,
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
            link_mode=old.link_mode,
        )
    replace["swapped"] = True
    run.nodes = run.cluster.ranked_nodes()
    run.finish(
        step,
        message("summary.swapped", spare=spare.name, rank=old.rank, old=old.name),
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
