"""Start (rank order, head first), stop (reverse order, drained) and rollback."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from django.conf import settings
from django.utils import timezone

from console.engine_auth import engine_headers, with_engine_key
from console.models import ClusterState, Node, NodeState
from console.models.operations import (
    OperationKind,
    OperationStep,
    StepState,
)
from console.services.agents import AgentUnreachable
from console.services.operations import (
    cluster_set_state,
)
from console.services.runbooks.base import StepFailed
from console.services.runbooks.preflight import PreflightRunbook


class LifecycleRunbook(PreflightRunbook):
    """Start in rank order, stop in reverse, and roll back a start that failed."""

    # -- start ------------------------------------------------------------------------

    def start_steps(self) -> dict[str, OperationStep]:
        steps: dict[str, OperationStep] = {}
        for node in self.nodes:
            steps[f"start:{node.name}"] = self.add_step(
                f"Start rank {node.rank} on {node.name}", node
            )
            if node.rank == 0:
                steps["listen"] = self.add_step(
                    f"Rank 0 listening on {node.management_ip}:{node.rpc_port}", node
                )
        steps["health"] = self.add_step(
            "Head /health answers 200 (all ranks joined)", self.head()
        )
        steps["smoke"] = self.add_step("Smoke test: one completion")
        steps["warmup"] = self.add_step("Warm-up requests")
        return steps

    def run_cleanup(self, step: OperationStep) -> None:
        """Stop engines an interrupted operation may have left running (reverse rank order)."""
        self.begin(step)
        statuses = self.call_all(
            self.nodes,
            "engine.status",
            timeout=settings.AGENT_TIMEOUT_S,
            kwargs_for=lambda n: {},
        )
        leftovers = [
            n
            for n in reversed(self.nodes)
            if not isinstance(statuses[n.name], Exception)
            and statuses[n.name]["state"] == "running"
        ]
        unreachable = [
            f"{n.name} ({statuses[n.name]})"
            for n in self.nodes
            if isinstance(statuses[n.name], Exception)
        ]
        if unreachable:
            raise self.fail(step, f"no answer from {'; '.join(unreachable)}")
        for node in leftovers:
            self.call(node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S)
        self.finish(
            step,
            f"stopped {', '.join(n.name for n in leftovers)}"
            if leftovers
            else "nothing left running",
        )

    def run_start(self, steps: dict[str, OperationStep]) -> None:
        assert self.plan is not None
        cluster_set_state(self.cluster, ClusterState.STARTING)
        plans = {p.name: p for p in self.plan.nodes}
        for node in self.nodes:  # rank order: the head binds first; headless ranks give up after 5 min without it
            step = steps[f"start:{node.name}"]
            self.begin(step)
            # Before the call: an answer lost to a timeout may hide an engine that came up,
            # and rollback must stop it too (stopping an engine that is not there is a no-op).
            self.started_nodes.append(node)
            answer = self.call(
                node,
                "engine.start",
                plan=with_engine_key(self.cluster.name, plans[node.name].to_dict()),
                timeout=settings.ENGINE_START_CALL_TIMEOUT_S,
            )
            if not answer.get("ok"):
                lines = str(answer.get("error", "")).splitlines()
                raise self.fail(
                    step, lines[0] if lines else "engine did not start", lines=lines
                )
            self.finish(
                step,
                f"pid {answer['pid']}",
                data={"pid": answer["pid"], "started_at": answer["started_at"]},
            )
            Node.objects.filter(pk=node.pk).update(state=NodeState.RUNNING)
            if node.rank == 0:
                self.wait_listening(steps["listen"], node)
            else:
                self.confirm_running(node, step)
        self.wait_healthy(steps["health"])
        self.smoke_test(steps["smoke"])
        self.warm_up(steps["warmup"])

    def confirm_running(self, node: Node, step: OperationStep) -> None:
        status = self.call(node, "engine.status")
        if status["state"] != "running":
            raise self.fail(
                step,
                f"engine on {node.name} is {status['state']} ({status.get('detail', '')})",
                lines=status.get("log_tail") or [],
            )

    def wait_listening(self, step: OperationStep, node: Node) -> None:
        self.begin(step)
        deadline = time.monotonic() + settings.ENGINE_LISTEN_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(
                    (node.management_ip, node.rpc_port), timeout=1
                ):
                    self.finish(
                        step,
                        f"{node.management_ip}:{node.rpc_port} accepts connections",
                    )
                    return
            except OSError:
                pass
            status = self.call(node, "engine.status")
            if status["state"] != "running":
                raise self.fail(
                    step,
                    f"rank 0 engine {status['state']} before binding its RPC port",
                    lines=status.get("log_tail") or [],
                )
            self.check_cancel()
            time.sleep(0.5)
        status = self.call(node, "engine.status")
        raise self.fail(
            step,
            f"nothing listens on {node.management_ip}:{node.rpc_port} after {settings.ENGINE_LISTEN_TIMEOUT_S}s",
            lines=status.get("log_tail") or [],
        )

    def wait_healthy(self, step: OperationStep) -> None:
        self.begin(step)
        head = self.head()
        total = len(self.nodes)
        deadline = time.monotonic() + settings.ENGINE_HEALTH_TIMEOUT_S
        last_joined = -1
        while time.monotonic() < deadline:
            status = self.call(head, "engine.status")
            if status["state"] != "running":
                raise self.fail(
                    step,
                    f"the head engine {status['state']}: {status.get('detail', '')}",
                    lines=status.get("log_tail") or [],
                )
            joined = int(status.get("ranks_joined") or 0)
            if joined != last_joined:
                last_joined = joined
                self.step_update(
                    step,
                    progress_done=min(joined, total),
                    progress_total=total,
                    summary=f"{joined}/{total} ranks joined",
                )
            if status.get("health") == 200:
                self.finish(
                    step,
                    f"/health 200, {total}/{total} ranks joined",
                    progress_done=total,
                    progress_total=total,
                )
                return
            for node in self.nodes[1:]:
                other = self.call(node, "engine.status")
                if other["state"] != "running":
                    raise self.fail(
                        step,
                        f"rank {node.rank} on {node.name} {other['state']}: {other.get('detail', '')}",
                        lines=other.get("log_tail") or [],
                    )
            self.check_cancel()
            time.sleep(1.0)
        status = self.call(head, "engine.logs", lines=200)
        raise self.fail(
            step,
            f"/health not 200 after {settings.ENGINE_HEALTH_TIMEOUT_S}s ({last_joined}/{total} ranks joined)",
            lines=status["lines"],
        )

    def smoke_test(self, step: OperationStep) -> None:
        self.begin(step)
        body = {
            "model": self.cluster.profile.served_model_name,
            "prompt": "Say hello to the Ascend ops team.",
            "max_tokens": 16,
            "temperature": 0,
        }
        try:
            response = httpx.post(
                f"{self.head_url()}/v1/completions",
                json=body,
                headers=engine_headers(self.cluster.name),
                timeout=settings.SMOKE_TIMEOUT_S,
            )
            response.raise_for_status()
            text = response.json()["choices"][0]["text"]
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise self.fail(step, f"completion failed: {exc}") from None
        if not text.strip():
            raise self.fail(step, "completion returned empty text")
        self.finish(step, f"{len(text.split())} words: {text[:120]}")

    def warm_up(self, step: OperationStep) -> None:
        total = int(self.op.params.get("warmup_requests", settings.WARMUP_REQUESTS))
        self.begin(step)
        self.step_update(step, progress_total=total)
        if total == 0:
            self.finish(step, "skipped (0 requests)", state=StepState.SKIPPED)
            return
        done = errors = 0
        lock = threading.Lock()
        url = f"{self.head_url()}/v1/chat/completions"
        headers = engine_headers(self.cluster.name)
        model = self.cluster.profile.served_model_name

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
                    self.step_update(
                        step,
                        progress_done=done,
                        summary=f"{done}/{total} sent, {errors} failed",
                    )
        if errors > total * settings.WARMUP_MAX_ERROR_FRACTION:
            raise self.fail(step, f"{errors} of {total} warm-up requests failed")
        self.finish(step, f"{total} requests, {errors} failed", progress_done=total)

    # -- stop ---------------------------------------------------------------------------

    def stop_steps(self, prefix: str = "") -> dict[str, OperationStep]:
        steps = {"drain": self.add_step(f"{prefix}Drain: wait for in-flight requests")}
        for node in reversed(self.nodes):
            steps[f"stop:{node.name}"] = self.add_step(
                f"{prefix}Stop rank {node.rank} on {node.name}", node
            )
        return steps

    def in_flight(self) -> int | None:
        """Running + waiting requests from the head's /metrics; None when it does not answer."""
        try:
            text = httpx.get(f"{self.head_url()}/metrics", timeout=3).text
        except httpx.HTTPError:
            return None
        total = 0.0
        for line in text.splitlines():
            if line.startswith(
                ("vllm:num_requests_running{", "vllm:num_requests_waiting{")
            ):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def run_stop(self, steps: dict[str, OperationStep]) -> None:
        step = steps["drain"]
        self.begin(step)
        cluster_set_state(self.cluster, ClusterState.DRAINING)
        deadline = time.monotonic() + settings.DRAIN_TIMEOUT_S
        count = self.in_flight()
        while count and time.monotonic() < deadline:
            self.step_update(step, summary=f"{count} requests in flight")
            time.sleep(1.0)
            count = self.in_flight()
        if count is None:
            self.finish(step, "head not serving; nothing to drain")
        elif count:
            self.finish(
                step,
                f"{count} requests still in flight after {settings.DRAIN_TIMEOUT_S}s; stopping anyway",
                state=StepState.WARNING,
            )
        else:
            self.finish(step, "no requests in flight")
        cluster_set_state(self.cluster, ClusterState.STOPPING)
        failures = []
        for node in reversed(
            self.nodes
        ):  # reverse rank order: headless ranks first, the head last
            step = steps[f"stop:{node.name}"]
            self.begin(step)
            try:
                status = self.call(
                    node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S
                )
            except AgentUnreachable as exc:
                failures.append(node.name)
                self.finish(step, str(exc), state=StepState.FAILED)
                continue
            if status["state"] == "running":
                failures.append(node.name)
                self.finish(
                    step, f"still running (pid {status['pid']})", state=StepState.FAILED
                )
                continue
            Node.objects.filter(pk=node.pk).update(state=NodeState.READY)
            self.finish(
                step,
                f"stopped ({status.get('detail') or status['state']})",
                data={"stopped_at": status.get("stopped_at")},
            )
        if failures:
            self.unconfirmed_down.extend(failures)
            cluster_set_state(self.cluster, ClusterState.FAILED)
            raise StepFailed(f"could not confirm {', '.join(failures)} stopped")
        cluster_set_state(self.cluster, ClusterState.STOPPED)

    def rollback(self) -> None:
        """Stop, in reverse order, every engine this operation started."""
        if not self.started_nodes:
            return
        step = self.add_step("Roll back: stop the ranks this operation started")
        self.begin(step)
        stopped, failed = [], []
        for node in reversed(self.started_nodes):
            try:
                status = self.call(
                    node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S
                )
                if status.get("state") == "running":
                    raise StepFailed(f"still running (pid {status.get('pid')})")
                Node.objects.filter(pk=node.pk).update(state=NodeState.READY)
                stopped.append(node.name)
            except Exception as exc:  # keep going: leave as little running as possible
                failed.append(f"{node.name}: {exc}")
                self.unconfirmed_down.append(node.name)
        for s in self.steps:
            if s.name.startswith("Start rank") and s.state == StepState.SUCCEEDED:
                self.step_update(s, state=StepState.ROLLED_BACK)
        self.finish(
            step,
            f"stopped {', '.join(stopped)}"
            + (f"; failed: {'; '.join(failed)}" if failed else ""),
            state=StepState.FAILED if failed else StepState.SUCCEEDED,
        )

    def skip_pending(self) -> None:
        for s in self.steps:
            if s.state == StepState.PENDING:
                self.step_update(s, state=StepState.SKIPPED)

    def after_start(self) -> None:
        """Hook for failover: record the new link modes once the engine is healthy."""
        overrides = self.link_overrides()
        for node in self.nodes:
            mode = overrides.get(node.name)
            if mode and mode != node.link_mode:
                Node.objects.filter(pk=node.pk).update(
                    link_mode=mode,
                    link_mode_since=timezone.now(),
                    link_mode_reason=(self.op.reason or f"operation #{self.op.pk}")[
                        :300
                    ],
                )

    def leave_stopped(self) -> None:
        """After a failure: Stopped, unless a rank could not be confirmed down (then Failed:
        something may still hold the NPUs, and the page must not say otherwise)."""
        if self.op.kind == OperationKind.PREFLIGHT:
            return
        self.cluster.refresh_from_db()
        cluster_set_state(
            self.cluster,
            ClusterState.FAILED if self.unconfirmed_down else ClusterState.STOPPED,
        )
