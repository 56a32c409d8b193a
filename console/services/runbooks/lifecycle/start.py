"""Start: clear leftovers, start the ranks in rank order (head first), wait until they
listen, join and answer /health; then record a failover's new link modes."""

from __future__ import annotations

import socket
import time
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.engine_auth import with_engine_key
from console.models import ClusterState, Node, NodeState
from console.models.operations import OperationStep
from console.opsmessages import message
from console.services.operations import (
    cluster_set_state,
)
from console.services.runbooks.base import Run, StepFailed
from console.services.runbooks.lifecycle.smoke import smoke_test, warm_up
from engine.checktext import join


def start_steps(run: Run) -> dict[str, OperationStep]:
    steps: dict[str, OperationStep] = {}
    for node in run.nodes:
        steps[f"start:{node.name}"] = run.add_step(
            f"Start rank {node.rank} on {node.name}", node
        )
        # Rank 0 binds its RPC port (--data-parallel-rpc-port, or --master-port with
        # --nnodes) for the ranks of other nodes to join; vLLM's data-parallel
        # handshake with remote engines (docs/serving/data_parallel_deployment.md) has
        # nothing to wait for on a single node, so nothing is awaited there.
        if node.rank == 0 and len(run.nodes) > 1:
            steps["listen"] = run.add_step(
                f"Rank 0 listening on {node.management_ip}:{node.rpc_port}", node
            )
    steps["health"] = run.add_step(
        "Head /health answers 200 (all ranks joined)", run.head()
    )
    steps["smoke"] = run.add_step("Smoke test: one completion")
    steps["warmup"] = run.add_step("Warm-up requests")
    return steps


def run_cleanup(run: Run, step: OperationStep) -> None:
    """Stop engines an interrupted operation may have left running (reverse rank order)."""
    run.begin(step)
    statuses = run.call_all(
        run.nodes,
        "engine.status",
        timeout=settings.AGENT_TIMEOUT_S,
        kwargs_for=lambda n: {},
    )
    leftovers = [
        n
        for n in reversed(run.nodes)
        if not isinstance(statuses[n.name], Exception)
        and statuses[n.name]["state"] == "running"
    ]
    unreachable = [
        f"{n.name} ({statuses[n.name]})"
        for n in run.nodes
        if isinstance(statuses[n.name], Exception)
    ]
    if unreachable:
        raise run.fail(
            step, message("summary.no_answer", nodes=join(unreachable, "; "))
        )
    for node in leftovers:
        run.call(node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S)
    run.finish(
        step,
        message("summary.stopped_nodes", nodes=", ".join(n.name for n in leftovers))
        if leftovers
        else message("summary.nothing_running"),
    )


def run_start(run: Run, steps: dict[str, OperationStep]) -> None:
    assert run.plan is not None
    cluster_set_state(run.cluster, ClusterState.STARTING)
    plans = {p.name: p for p in run.plan.nodes}
    for node in run.nodes:  # rank order: the head binds first; headless ranks give up after 5 min without it
        step = steps[f"start:{node.name}"]
        run.begin(step)
        # Before the call: an answer lost to a timeout may hide an engine that came up,
        # and rollback must stop it too (stopping an engine that is not there is a no-op).
        run.started_nodes.append(node)
        answer = run.call(
            node,
            "engine.start",
            plan=with_engine_key(run.cluster.name, plans[node.name].to_dict()),
            timeout=settings.ENGINE_START_CALL_TIMEOUT_S,
        )
        if not answer.get("ok"):
            lines = str(answer.get("error", "")).splitlines()
            raise run.fail(
                step,
                lines[0] if lines else message("summary.engine_not_started"),
                lines=lines,
            )
        run.finish(
            step,
            message("summary.pid", pid=answer["pid"]),
            data={"pid": answer["pid"], "started_at": answer["started_at"]},
        )
        Node.objects.filter(pk=node.pk).update(state=NodeState.RUNNING)
        if node.rank == 0 and "listen" in steps:
            wait_listening(run, steps["listen"], node)
        else:
            confirm_running(run, node, step)
    wait_healthy(run, steps["health"])
    smoke_test(run, steps["smoke"])
    warm_up(run, steps["warmup"])


def confirm_running(run: Run, node: Node, step: OperationStep) -> None:
    status = run.call(node, "engine.status")
    _fail_unless_running(
        run,
        step,
        status,
        message(
            "summary.engine_is",
            node=node.name,
            state=status["state"],
            detail=status.get("detail", ""),
        ),
    )


def _fail_unless_running(
    run: Run, step: OperationStep, status: dict[str, Any], summary: dict[str, Any]
) -> None:
    """An engine.status answer that is not "running" fails the step with the engine's log."""
    if status["state"] != "running":
        raise run.fail(step, summary, lines=status.get("log_tail") or [])


def wait_listening(run: Run, step: OperationStep, node: Node) -> None:
    run.begin(step)
    deadline = time.monotonic() + settings.ENGINE_LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(
                (node.management_ip, node.rpc_port), timeout=1
            ):
                run.finish(
                    step,
                    message(
                        "summary.accepts",
                        address=f"{node.management_ip}:{node.rpc_port}",
                    ),
                )
                return
        except OSError:
            pass
        status = run.call(node, "engine.status")
        _fail_unless_running(
            run,
            step,
            status,
            message("summary.rank0_before_bind", state=status["state"]),
        )
        run.check_cancel()
        time.sleep(0.5)
    status = run.call(node, "engine.status")
    raise run.fail(
        step,
        message(
            "summary.nothing_listens",
            address=f"{node.management_ip}:{node.rpc_port}",
            seconds=settings.ENGINE_LISTEN_TIMEOUT_S,
        ),
        lines=status.get("log_tail") or [],
    )


def wait_healthy(run: Run, step: OperationStep) -> None:
    """Poll the head until /health answers 200 (every rank joined); any rank that stops
    running, or the deadline, fails the step with the engine's log."""
    run.begin(step)
    head = run.head()
    total = len(run.nodes)
    deadline = time.monotonic() + settings.ENGINE_HEALTH_TIMEOUT_S
    last_joined = -1
    while time.monotonic() < deadline:
        status = run.call(head, "engine.status")
        _fail_unless_running(
            run,
            step,
            status,
            message(
                "summary.head_engine",
                state=status["state"],
                detail=status.get("detail", ""),
            ),
        )
        last_joined = _show_ranks_joined(run, step, status, last_joined)
        if status.get("health") == 200:
            run.finish(
                step,
                message("summary.health_ok", joined=total, total=total),
                progress_done=total,
                progress_total=total,
            )
            return
        _fail_unless_ranks_running(run, step)
        run.check_cancel()
        time.sleep(1.0)
    raise _health_timeout(run, step, head, last_joined)


def _show_ranks_joined(
    run: Run, step: OperationStep, status: dict[str, Any], last_joined: int
) -> int:
    """Publish the head's count of joined ranks when it changed; return the count."""
    total = len(run.nodes)
    joined = int(status.get("ranks_joined") or 0)
    if joined != last_joined:
        run.step_update(
            step,
            progress_done=min(joined, total),
            progress_total=total,
            summary=message("summary.ranks_joined", joined=joined, total=total),
        )
    return joined


def _fail_unless_ranks_running(run: Run, step: OperationStep) -> None:
    """Fail the step when a rank other than the head is no longer running."""
    for node in run.nodes[1:]:
        other = run.call(node, "engine.status")
        _fail_unless_running(
            run,
            step,
            other,
            message(
                "summary.rank_state",
                rank=node.rank,
                node=node.name,
                state=other["state"],
                detail=other.get("detail", ""),
            ),
        )


def _health_timeout(
    run: Run, step: OperationStep, head: Node, last_joined: int
) -> StepFailed:
    """Fail the step at the health deadline, with the head's last 200 log lines."""
    total = len(run.nodes)
    status = run.call(head, "engine.logs", lines=200)
    return run.fail(
        step,
        message(
            "summary.health_timeout",
            seconds=settings.ENGINE_HEALTH_TIMEOUT_S,
            joined=last_joined,
            total=total,
        ),
        lines=status["lines"],
    )


def after_start(run: Run) -> None:
    """Hook for failover: record the new link modes once the engine is healthy."""
    overrides = run.link_overrides()
    for node in run.nodes:
        mode = overrides.get(node.name)
        if mode and mode != node.link_mode:
            Node.objects.filter(pk=node.pk).update(
                link_mode=mode,
                link_mode_since=timezone.now(),
                link_mode_reason=(run.op.reason or f"operation #{run.op.pk}")[:300],
            )
