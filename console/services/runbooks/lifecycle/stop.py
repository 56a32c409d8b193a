"""Stop (drain, then reverse rank order) and the unwinding of a failed run: roll back
the ranks it started, skip the rows left pending, leave the cluster Stopped."""

from __future__ import annotations

import time

import httpx
from django.conf import settings

from console.models import ClusterState, Node, NodeState
from console.models.operations import (
    READ_ONLY_KINDS,
    OperationStep,
    StepState,
)
from console.opsmessages import message
from console.services.agents import AgentUnreachable
from console.services.operations import (
    cluster_set_state,
)
from console.services.runbooks.base import Run, StepFailed


def stop_steps(run: Run, prefix: str = "") -> dict[str, OperationStep]:
    steps = {"drain": run.add_step(f"{prefix}Drain: wait for in-flight requests")}
    for node in reversed(run.nodes):
        steps[f"stop:{node.name}"] = run.add_step(
            f"{prefix}Stop rank {node.rank} on {node.name}", node
        )
    return steps


def in_flight(run: Run) -> int | None:
    """Running + waiting requests from the head's /metrics; None when it does not answer."""
    try:
        text = httpx.get(f"{run.head_url()}/metrics", timeout=3).text
    except httpx.HTTPError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith(
            ("vllm:num_requests_running{", "vllm:num_requests_waiting{")
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def run_stop(run: Run, steps: dict[str, OperationStep]) -> None:
    """Drain, then stop every rank in reverse rank order; Stopped, or Failed (and
    StepFailed) when a rank could not be confirmed down."""
    _drain(run, steps["drain"])
    cluster_set_state(run.cluster, ClusterState.STOPPING)
    failures = []
    for node in reversed(
        run.nodes
    ):  # reverse rank order: headless ranks first, the head last
        if not _stop_rank(run, steps[f"stop:{node.name}"], node):
            failures.append(node.name)
    if failures:
        run.unconfirmed_down.extend(failures)
        cluster_set_state(run.cluster, ClusterState.FAILED)
        raise StepFailed(f"could not confirm {', '.join(failures)} stopped")
    cluster_set_state(run.cluster, ClusterState.STOPPED)


def _drain(run: Run, step: OperationStep) -> None:
    """Mark the cluster Draining and wait (up to DRAIN_TIMEOUT_S) for in-flight requests."""
    run.begin(step)
    cluster_set_state(run.cluster, ClusterState.DRAINING)
    deadline = time.monotonic() + settings.DRAIN_TIMEOUT_S
    count = in_flight(run)
    while count and time.monotonic() < deadline:
        run.step_update(step, summary=message("summary.in_flight", count=count))
        time.sleep(1.0)
        count = in_flight(run)
    if count is None:
        run.finish(step, message("summary.head_not_serving"))
    elif count:
        run.finish(
            step,
            message(
                "summary.still_in_flight",
                count=count,
                seconds=settings.DRAIN_TIMEOUT_S,
            ),
            state=StepState.WARNING,
        )
    else:
        run.finish(step, message("summary.none_in_flight"))


def _stop_rank(run: Run, step: OperationStep, node: Node) -> bool:
    """Stop one rank's engine; returns False when it could not be confirmed down."""
    run.begin(step)
    try:
        status = run.call(node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S)
    except AgentUnreachable as exc:
        run.finish(step, str(exc), state=StepState.FAILED)
        return False
    if status["state"] == "running":
        run.finish(
            step,
            message("summary.still_running", pid=status["pid"]),
            state=StepState.FAILED,
        )
        return False
    Node.objects.filter(pk=node.pk).update(state=NodeState.READY)
    run.finish(
        step,
        message(
            "summary.stopped_detail", detail=status.get("detail") or status["state"]
        ),
        data={"stopped_at": status.get("stopped_at")},
    )
    return True


def rollback(run: Run) -> None:
    """Stop, in reverse order, every engine this operation started."""
    if not run.started_nodes:
        return
    step = run.add_step("Roll back: stop the ranks this operation started")
    run.begin(step)
    stopped, failed = [], []
    for node in reversed(run.started_nodes):
        try:
            status = run.call(
                node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S
            )
            if status.get("state") == "running":
                raise StepFailed(f"still running (pid {status.get('pid')})")
            Node.objects.filter(pk=node.pk).update(state=NodeState.READY)
            stopped.append(node.name)
        except Exception as exc:  # keep going: leave as little running as possible
            failed.append(f"{node.name}: {exc}")
            run.unconfirmed_down.append(node.name)
    for s in run.steps:
        if s.name.startswith("Start rank") and s.state == StepState.SUCCEEDED:
            run.step_update(s, state=StepState.ROLLED_BACK)
    run.finish(
        step,
        message(
            "summary.stopped_failed",
            nodes=", ".join(stopped),
            failures="; ".join(failed),
        )
        if failed
        else message("summary.stopped_nodes", nodes=", ".join(stopped)),
        state=StepState.FAILED if failed else StepState.SUCCEEDED,
    )


def skip_pending(run: Run) -> None:
    for s in run.steps:
        if s.state == StepState.PENDING:
            run.step_update(s, state=StepState.SKIPPED)


def leave_stopped(run: Run) -> None:
    """After a failure: Stopped, unless a rank could not be confirmed down (then Failed:
    something may still hold the NPUs, and the page must not say otherwise)."""
    if run.op.kind in READ_ONLY_KINDS:
        return
    run.cluster.refresh_from_db()
    cluster_set_state(
        run.cluster,
        ClusterState.FAILED if run.unconfirmed_down else ClusterState.STOPPED,
    )
