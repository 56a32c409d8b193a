"""Start (rank order, head first), stop (reverse order, drained) and rollback."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from django.conf import settings
from django.utils import timezone

from console.engine_auth import engine_headers, with_engine_key
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
from engine.checktext import join

# -- start ------------------------------------------------------------------------


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
        joined = int(status.get("ranks_joined") or 0)
        if joined != last_joined:
            last_joined = joined
            run.step_update(
                step,
                progress_done=min(joined, total),
                progress_total=total,
                summary=message("summary.ranks_joined", joined=joined, total=total),
            )
        if status.get("health") == 200:
            run.finish(
                step,
                message("summary.health_ok", joined=total, total=total),
                progress_done=total,
                progress_total=total,
            )
            return
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
        run.check_cancel()
        time.sleep(1.0)
    status = run.call(head, "engine.logs", lines=200)
    raise run.fail(
        step,
        message(
            "summary.health_timeout",
            seconds=settings.ENGINE_HEALTH_TIMEOUT_S,
            joined=last_joined,
            total=total,
        ),
        lines=status["lines"],
    )


def smoke_test(run: Run, step: OperationStep) -> None:
    run.begin(step)
    body = {
        "model": run.cluster.profile.served_model_name,
        "prompt": "Say hello to the Ascend ops team.",
        "max_tokens": 16,
        "temperature": 0,
    }
    try:
        response = httpx.post(
            f"{run.head_url()}/v1/completions",
            json=body,
            headers=engine_headers(run.cluster.name),
            timeout=settings.SMOKE_TIMEOUT_S,
        )
        response.raise_for_status()
        text = response.json()["choices"][0]["text"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise run.fail(
            step, message("summary.completion_failed", error=str(exc))
        ) from None
    if not text.strip():
        raise run.fail(step, message("summary.completion_empty"))
    run.finish(
        step, message("summary.smoke_words", count=len(text.split()), text=text[:120])
    )


def warm_up(run: Run, step: OperationStep) -> None:
    total = int(run.op.params.get("warmup_requests", settings.WARMUP_REQUESTS))
    run.begin(step)
    run.step_update(step, progress_total=total)
    if total == 0:
        run.finish(step, message("summary.warmup_skipped"), state=StepState.SKIPPED)
        return
    done = errors = 0
    lock = threading.Lock()
    url = f"{run.head_url()}/v1/chat/completions"
    headers = engine_headers(run.cluster.name)
    model = run.cluster.profile.served_model_name

    def one(i: int) -> bool:
        body = {
            "model": model,
            "messages": [
                {
                    "role": "user",
                    "content": f"Warm-up request {i}: summarise HCCS vs RoCE.",
                }
            ],
            "max_tokens": 32,
        }
        try:
            with httpx.Client(
                timeout=settings.SMOKE_TIMEOUT_S, headers=headers
            ) as client:
                return client.post(url, json=body).status_code == 200
        except httpx.HTTPError:
            return False

    publish_every = max(1, total // 20)
    with ThreadPoolExecutor(max_workers=settings.WARMUP_CONCURRENCY) as pool:
        for ok in pool.map(one, range(total)):
            with lock:
                done += 1
                errors += 0 if ok else 1
            if done % publish_every == 0 or done == total:
                run.step_update(
                    step,
                    progress_done=done,
                    summary=message(
                        "summary.warmup_progress",
                        done=done,
                        total=total,
                        errors=errors,
                    ),
                )
    if errors > total * settings.WARMUP_MAX_ERROR_FRACTION:
        raise run.fail(
            step, message("summary.warmup_failed", errors=errors, total=total)
        )
    run.finish(
        step,
        message("summary.warmup_done", total=total, errors=errors),
        progress_done=total,
    )


# -- stop ---------------------------------------------------------------------------


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
    step = steps["drain"]
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
    cluster_set_state(run.cluster, ClusterState.STOPPING)
    failures = []
    for node in reversed(
        run.nodes
    ):  # reverse rank order: headless ranks first, the head last
        step = steps[f"stop:{node.name}"]
        run.begin(step)
        try:
            status = run.call(
                node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S
            )
        except AgentUnreachable as exc:
            failures.append(node.name)
            run.finish(step, str(exc), state=StepState.FAILED)
            continue
        if status["state"] == "running":
            failures.append(node.name)
            run.finish(
                step,
                message("summary.still_running", pid=status["pid"]),
                state=StepState.FAILED,
            )
            continue
        Node.objects.filter(pk=node.pk).update(state=NodeState.READY)
        run.finish(
            step,
            message(
                "summary.stopped_detail", detail=status.get("detail") or status["state"]
            ),
            data={"stopped_at": status.get("stopped_at")},
        )
    if failures:
        run.unconfirmed_down.extend(failures)
        cluster_set_state(run.cluster, ClusterState.FAILED)
        raise StepFailed(f"could not confirm {', '.join(failures)} stopped")
    cluster_set_state(run.cluster, ClusterState.STOPPED)


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
