"""The runbooks: what preflight, start, stop and restart do, step by step.

Run by the control worker (console.tasks.operation_run_task). Every step is a row
the operator watches live; a failed start stops what it started, in reverse rank
order, and leaves the cluster Stopped — never half up.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from console.celery import app, node_queue
from console.models import Cluster, ClusterState, Node, NodeRole, NodeState
from console.models.operations import (
    Operation,
    OperationKind,
    OperationState,
    OperationStep,
    StepState,
)
from console.services.agents import AgentUnreachable, agent_call
from console.services.operations import (
    cluster_set_state,
    operation_claim,
    operation_heartbeat,
    operation_publish,
    operation_terminate,
)
from console.services.plans import cluster_plan, node_spec
from engine.diagnose import diagnose
from engine.plans import ClusterPlan, PlanError

log = logging.getLogger(__name__)


class StepFailed(Exception):
    """A step could not complete; the runbook rolls back what it started."""


class Cancelled(Exception):
    """An operator cancelled the operation."""


class Runbook:
    """Executes one operation. Steps are created up front so progress has a known total."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.cluster: Cluster = op.cluster
        self.nodes: list[Node] = self.cluster.ranked_nodes()
        self.steps: list[OperationStep] = []
        self.started_nodes: list[Node] = []  # for rollback, in start order
        self.plan: ClusterPlan | None = None
        self.result: dict[str, Any] = {}

    # -- step bookkeeping -----------------------------------------------------------

    def add_step(self, name: str, node: Node | None = None) -> OperationStep:
        step = OperationStep.objects.create(
            operation=self.op, seq=len(self.steps) + 1, name=name, node=node
        )
        self.steps.append(step)
        return step

    def step_update(self, step: OperationStep, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(step, key, value)
        step.save()
        operation_publish(self.op, step)

    def begin(self, step: OperationStep) -> None:
        self.check_cancel()
        self.step_update(step, state=StepState.RUNNING, started_at=timezone.now())

    def finish(
        self,
        step: OperationStep,
        summary: str,
        state: str = StepState.SUCCEEDED,
        **fields: Any,
    ) -> None:
        self.step_update(
            step,
            state=state,
            finished_at=timezone.now(),
            summary=summary[:500],
            **fields,
        )

    def fail(
        self,
        step: OperationStep,
        summary: str,
        *,
        lines: list[str] | None = None,
        **fields: Any,
    ) -> StepFailed:
        lines = lines or []
        diagnoses = [d.to_dict() for d in diagnose(lines)] if lines else []
        self.finish(
            step,
            summary,
            state=StepState.FAILED,
            log_tail="\n".join(lines[-80:]),
            diagnosis=diagnoses,
            **fields,
        )
        return StepFailed(f"{step.name}: {summary}")

    def check_cancel(self) -> None:
        params = (
            Operation.objects.filter(pk=self.op.pk)
            .values_list("params", flat=True)
            .first()
            or {}
        )
        if params.get("cancel_requested"):
            raise Cancelled(f"cancelled by {params['cancel_requested']}")

    # -- agents -------------------------------------------------------------------------

    def call(
        self, node: Node, task: str, *, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        return agent_call(
            node, task, timeout=timeout or settings.AGENT_TIMEOUT_S, **kwargs
        )

    def call_all(
        self,
        nodes: list[Node],
        task: str,
        *,
        timeout: float,
        kwargs_for: Callable[[Node], dict[str, Any]],
    ) -> dict[str, Any]:
        """Send one task to many agents at once; gather answers (or the exception) per node."""
        pending = {
            n.name: app.send_task(
                task,
                kwargs={"node": n.name, **kwargs_for(n)},
                queue=n.agent_queue or node_queue(n.name),
                expires=timeout,
            )
            for n in nodes
        }
        deadline = time.monotonic() + timeout
        answers: dict[str, Any] = {}
        for name, result in pending.items():
            try:
                answers[name] = result.get(
                    timeout=max(0.1, deadline - time.monotonic()),
                    disable_sync_subtasks=False,
                )
            except Exception as exc:  # timeout or the agent's own error: both are evidence for the operator
                is_timeout = "TimeoutError" in type(exc).__name__
                answers[name] = (
                    AgentUnreachable(f"no answer within {timeout:.0f}s")
                    if is_timeout
                    else exc
                )
            finally:
                result.forget()
        return answers

    # -- plan ---------------------------------------------------------------------------

    def link_overrides(self) -> dict[str, str]:
        return dict(self.op.params.get("link_modes") or {})

    def build_plan(self) -> ClusterPlan:
        overrides = self.link_overrides()
        specs = [node_spec(n, link_mode=overrides.get(n.name)) for n in self.nodes]
        return cluster_plan(self.cluster, nodes=specs)

    def head(self) -> Node:
        return self.nodes[0]

    def head_url(self) -> str:
        head = self.head()
        return f"http://{head.management_ip}:{head.api_port}"

    # -- preflight ----------------------------------------------------------------------

    def preflight_steps(self) -> dict[str, OperationStep]:
        steps = {"reach": self.add_step("Agents reachable")}
        for node in self.nodes:
            steps[node.name] = self.add_step(f"Preflight checks on {node.name}", node)
        steps["consistency"] = self.add_step("Same versions and model on every node")
        steps["plan"] = self.add_step("Launch plan valid and fits in HBM")
        return steps

    def run_preflight(self, steps: dict[str, OperationStep]) -> bool:
        """Run every check; returns True when nothing failed. Results land in op.result['preflight']."""
        table: dict[str, list[dict[str, Any]]] = {}
        ok = True
        step = steps["reach"]
        self.begin(step)
        beats = self.call_all(
            self.nodes,
            "node.heartbeat",
            timeout=settings.PREFLIGHT_REACH_TIMEOUT_S,
            kwargs_for=lambda n: {},
        )
        down = [name for name, answer in beats.items() if isinstance(answer, Exception)]
        for name, answer in beats.items():
            table.setdefault(name, []).append(
                {
                    "name": "agent reachable",
                    "status": "fail" if isinstance(answer, Exception) else "pass",
                    "evidence": str(answer)
                    if isinstance(answer, Exception)
                    else f"{answer['hostname']} pid {answer['pid']} ({answer['driver']})",
                    "fix": f"Start the node agent: systemctl start ascend-agent@{name} (queue node.{name})"
                    if isinstance(answer, Exception)
                    else "",
                }
            )
        if down:
            ok = False
            self.finish(
                step, f"no answer from {', '.join(down)}", state=StepState.FAILED
            )
        else:
            self.finish(step, f"{len(self.nodes)} agents answered")
        reachable = [n for n in self.nodes if n.name not in down]
        head = self.head()
        head_ips = list(head.npu_ips or [])
        peer_ips = list(self.nodes[1].npu_ips or []) if len(self.nodes) > 1 else []

        def checks_for(n: Node) -> dict[str, Any]:
            ports = [n.api_port, n.rpc_port] if n.pk == head.pk else []
            return {
                "expected_npus": n.npu_count,
                "host_ip": n.management_ip,
                "ports": ports,
                "model_path": self.cluster.profile.model_path,
                "ping_targets": peer_ips if n.pk == head.pk else head_ips,
            }

        for node in reachable:
            self.begin(steps[node.name])
        answers = self.call_all(
            reachable,
            "node.preflight",
            timeout=settings.PREFLIGHT_TIMEOUT_S,
            kwargs_for=checks_for,
        )
        versions: dict[str, dict[str, Any]] = {}
        sizes: dict[str, Any] = {}
        for node in self.nodes:
            step = steps[node.name]
            if node.name in down:
                self.finish(
                    step, "agent unreachable; checks not run", state=StepState.SKIPPED
                )
                continue
            answer = answers[node.name]
            if isinstance(answer, Exception):
                ok = False
                table[node.name].append(
                    {
                        "name": "preflight",
                        "status": "fail",
                        "evidence": str(answer),
                        "fix": "Check the agent log on the node.",
                    }
                )
                self.finish(step, str(answer)[:300], state=StepState.FAILED)
                continue
            checks = answer["checks"]
            table[node.name].extend(checks)
            versions[node.name] = answer["versions"]
            sizes[node.name] = answer["model_size"]
            failed = [c for c in checks if c["status"] == "fail"]
            warned = [c for c in checks if c["status"] == "warn"]
            if failed:
                ok = False
                self.finish(
                    step,
                    "; ".join(f"{c['name']}: {c['evidence']}" for c in failed),
                    state=StepState.FAILED,
                    data={"checks": checks},
                )
            else:
                self.finish(
                    step,
                    f"{len(checks)} checks passed"
                    + (f", {len(warned)} warnings" if warned else ""),
                    state=StepState.WARNING if warned else StepState.SUCCEEDED,
                    data={"checks": checks},
                )
        step = steps["consistency"]
        self.begin(step)
        problems = []
        for key in ("driver", "firmware", "cann", "vllm", "vllm_ascend", "torch_npu"):
            seen: dict[Any, list[str]] = {}
            for name, v in versions.items():
                seen.setdefault(v.get(key), []).append(name)
            if len(seen) > 1:
                detail = "; ".join(
                    f"{value} on {', '.join(names)}" for value, names in seen.items()
                )
                problems.append(f"{key} differs: {detail}")
                for value, names in seen.items():
                    if len(names) < max(len(x) for x in seen.values()):
                        for name in names:
                            table[name].append(
                                {
                                    "name": f"{key} version",
                                    "status": "fail",
                                    "evidence": f"{key} {value} on {name}; others: {detail}",
                                    "fix": f"Install the same {key} on every node (pip install .[node] pins vllm/vllm-ascend/torch_npu).",
                                }
                            )
        if len(set(sizes.values())) > 1:
            problems.append(
                "model size differs: " + ", ".join(f"{n}={s}" for n, s in sizes.items())
            )
        if problems:
            ok = False
            self.finish(
                step,
                " | ".join(problems),
                state=StepState.FAILED,
                data={"versions": versions},
            )
        else:
            self.finish(
                step,
                "identical on every node" if versions else "no node answered",
                data={"versions": versions},
            )
        step = steps["plan"]
        self.begin(step)
        try:
            self.plan = self.build_plan()
        except PlanError as exc:
            ok = False
            flat = [
                f"{field}: {msg}" for field, msgs in exc.errors.items() for msg in msgs
            ]
            table.setdefault("cluster", []).append(
                {
                    "name": "launch plan",
                    "status": "fail",
                    "evidence": " ".join(flat),
                    "fix": "Fix the profile or the inventory as the message says.",
                }
            )
            self.finish(
                step,
                " ".join(flat),
                state=StepState.FAILED,
                data={"errors": exc.errors},
            )
        else:
            table.setdefault("cluster", []).append(
                {
                    "name": "launch plan",
                    "status": "pass",
                    "evidence": self.plan.fit.detail,
                    "fix": "",
                }
            )
            self.finish(
                step, self.plan.fit.detail, data={"fit": self.plan.fit.to_dict()}
            )
        self.result["preflight"] = {"ok": ok, "nodes": table}
        return ok

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
            answer = self.call(
                node,
                "engine.start",
                plan=plans[node.name].to_dict(),
                timeout=settings.ENGINE_START_CALL_TIMEOUT_S,
            )
            if not answer.get("ok"):
                lines = str(answer.get("error", "")).splitlines()
                raise self.fail(
                    step, lines[0] if lines else "engine did not start", lines=lines
                )
            self.started_nodes.append(node)
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
                with httpx.Client(timeout=settings.SMOKE_TIMEOUT_S) as client:
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
                self.call(node, "engine.stop", timeout=settings.ENGINE_STOP_TIMEOUT_S)
                Node.objects.filter(pk=node.pk).update(state=NodeState.READY)
                stopped.append(node.name)
            except Exception as exc:  # keep going: leave as little running as possible
                failed.append(f"{node.name}: {exc}")
        for s in self.steps:
            if s.name.startswith("Start rank") and s.state == StepState.SUCCEEDED:
                self.step_update(s, state=StepState.ROLLED_BACK)
        self.finish(
            step,
            f"stopped {', '.join(stopped)}"
            + (f"; failed: {'; '.join(failed)}" if failed else ""),
            state=StepState.FAILED if failed else StepState.SUCCEEDED,
        )

    # -- entry ------------------------------------------------------------------------------

    def run(self) -> None:
        kind = self.op.kind
        if not self.nodes:
            operation_terminate(
                self.op, OperationState.FAILED, error="the cluster has no nodes"
            )
            return
        try:
            if kind == OperationKind.PREFLIGHT:
                ok = self.run_preflight(self.preflight_steps())
                state = OperationState.SUCCEEDED if ok else OperationState.FAILED
                operation_terminate(
                    self.op,
                    state,
                    error="" if ok else "preflight found problems",
                    result=self.result,
                )
                return
            if kind == OperationKind.STOP:
                self.run_stop(self.stop_steps())
            elif kind in (
                OperationKind.START,
                OperationKind.RESTART,
                OperationKind.FAILOVER,
                OperationKind.REPLACE,
            ):
                cleanup = (
                    self.add_step("Clear leftover engines")
                    if kind == OperationKind.START
                    else None
                )
                replace = (
                    self.replace_prepare() if kind == OperationKind.REPLACE else None
                )
                stop_steps = (
                    self.stop_steps("Stop first: ") if cleanup is None else None
                )
                if replace is not None:
                    replace["swap"] = self.add_step(
                        f"Swap {replace['old'].name} for {replace['spare'].name} in the inventory"
                    )
                    self.nodes = replace["new_nodes"]
                pre = self.preflight_steps()
                start = self.start_steps()
                verify_node = self.op.params.get("verify_node")
                verify = (
                    self.add_step(
                        f"Verify the switch on {verify_node}: HCCS counters still, RoCE counters growing"
                    )
                    if verify_node
                    else None
                )
                if cleanup is not None:
                    self.run_cleanup(cleanup)
                if replace is not None:
                    self.replace_spare_preflight(replace)
                    self.nodes = replace["old_nodes"]
                if stop_steps is not None:
                    self.run_stop(stop_steps)
                if replace is not None:
                    self.replace_swap(replace)
                if not self.run_preflight(pre):
                    if not self.op.force:
                        raise StepFailed(
                            "preflight failed; fix the failing checks (or have an admin force the start)"
                        )
                    self.add_step("Preflight failed but an admin forced the start")
                if self.plan is None:
                    raise StepFailed("no valid launch plan")
                self.run_start(start)
                self.after_start()
                if verify is not None:
                    self.verify_link_switch(verify, str(verify_node))
                cluster_set_state(self.cluster, ClusterState.RUNNING)
            else:
                raise StepFailed(f"{kind} is not implemented by this runbook")
        except Cancelled as exc:
            self.rollback()
            self.replace_undo()
            self.skip_pending()
            self.leave_stopped()
            operation_terminate(
                self.op, OperationState.CANCELLED, error=str(exc), result=self.result
            )
            return
        except Exception as exc:
            if not isinstance(exc, StepFailed):
                log.exception("operation %s crashed", self.op.pk)
                for s in self.steps:
                    if s.state == StepState.RUNNING:
                        self.fail(s, f"internal error: {exc!r}")
            self.rollback()
            self.replace_undo()
            self.skip_pending()
            self.leave_stopped()
            operation_terminate(
                self.op, OperationState.FAILED, error=str(exc), result=self.result
            )
            return
        self.skip_pending()
        operation_terminate(self.op, OperationState.SUCCEEDED, result=self.result)

    # -- failover verification -----------------------------------------------------------

    @staticmethod
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

    def verify_link_switch(self, step: OperationStep, node_name: str) -> None:
        """With traffic flowing, the node's HCCS counters must stand still and its RoCE counters grow.

        Whether HCCL honours HCCL_INTRA_ROCE_ENABLE depends on hardware, CANN version and the
        operator path, so this is measured, not assumed. A failed verification is a warning on
        the step and ``result['verification']['ok'] = False``: the engine is healthy, but the
        incident moves on to its second remedy.
        """
        self.begin(step)
        node = next(n for n in self.nodes if n.name == node_name)
        window = float(settings.FAILOVER_VERIFY_S)
        stop = threading.Event()
        url = f"{self.head_url()}/v1/completions"
        body = {
            "model": self.cluster.profile.served_model_name,
            "prompt": "Verify the link switch.",
            "max_tokens": 32,
        }

        def traffic() -> None:
            with httpx.Client(timeout=30) as client:
                while not stop.is_set():
                    try:
                        client.post(url, json=body)
                    except httpx.HTTPError:
                        stop.wait(0.2)

        threads = [threading.Thread(target=traffic, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            time.sleep(
                min(1.0, window / 4)
            )  # traffic under way before the first reading
            for attempt in range(2):
                first = self.call(node, "node.collect")
                time.sleep(window)
                second = self.call(node, "node.collect")
                (h0, r0), (h1, r1) = (
                    self.link_counters(first),
                    self.link_counters(second),
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
            True
            if hccs_delta == 0 and roce_delta > 0
            else (False if hccs_delta else None)
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
        self.result["verification"] = {
            "ok": ok,
            "node": node_name,
            "window_s": window,
            "hccs_delta": hccs_delta,
            "roce_delta": roce_delta,
            "detail": detail,
        }
        self.finish(
            step,
            detail,
            state=StepState.SUCCEEDED if ok else StepState.WARNING,
            data=self.result["verification"],
        )

    # -- replace a node with a spare ------------------------------------------------------

    def replace_prepare(self) -> dict[str, Any]:
        """Pick the spare for params['node'] (or params['spare']); the new rank list, steps created later."""
        from monitoring.remediation import spare_for

        step = self.add_step("Choose an idle spare of the same hardware")
        self.begin(step)
        name = self.op.params.get("node")
        old = next((n for n in self.nodes if n.name == name), None)
        if old is None:
            raise self.fail(step, f"{name!r} is not a node of {self.cluster.name}")
        wanted = self.op.params.get("spare")
        spare = (
            Node.objects.filter(
                name=wanted, cluster__isnull=True, role=NodeRole.SPARE
            ).first()
            if wanted
            else spare_for(old)
        )
        if spare is None:
            raise self.fail(
                step,
                f"no idle spare with {old.npu_count} × {old.npu_model} ({old.hbm_per_npu_gb} GB) for {old.name}",
            )
        self.finish(step, f"{spare.name} takes rank {old.rank} from {old.name}")
        new_nodes = [spare if n.pk == old.pk else n for n in self.nodes]
        spare.rank, spare.role = (
            old.rank,
            old.role,
        )  # in memory only, for the plan and the steps
        self.result["replace"] = {
            "old": old.name,
            "spare": spare.name,
            "rank": old.rank,
        }
        return {
            "old": old,
            "spare": spare,
            "old_nodes": list(self.nodes),
            "new_nodes": new_nodes,
            "spare_step": self.add_step(f"Preflight on the spare {spare.name}", spare),
            "swapped": False,
        }

    def replace_spare_preflight(self, replace: dict[str, Any]) -> None:
        """The spare's own checks pass before anything running is touched."""
        step, spare = replace["spare_step"], replace["spare"]
        self.begin(step)
        head = self.nodes[0]
        try:
            answer = self.call(
                spare,
                "node.preflight",
                timeout=settings.PREFLIGHT_TIMEOUT_S,
                expected_npus=spare.npu_count,
                host_ip=spare.management_ip,
                ports=[spare.api_port, spare.rpc_port] if spare.rank == 0 else [],
                model_path=self.cluster.profile.model_path,
                ping_targets=list(head.npu_ips or []) if head.pk != spare.pk else [],
            )
        except AgentUnreachable as exc:
            raise self.fail(step, f"{spare.name}: {exc}") from None
        failed = [c for c in answer["checks"] if c["status"] == "fail"]
        if failed:
            raise self.fail(
                step,
                "; ".join(f"{c['name']}: {c['evidence']}" for c in failed),
                data={"checks": answer["checks"]},
            )
        self.finish(
            step,
            f"{len(answer['checks'])} checks passed",
            data={"checks": answer["checks"]},
        )

    def replace_swap(self, replace: dict[str, Any]) -> None:
        """The spare takes the old node's rank and role; the old node leaves the cluster, out of service."""
        step, old, spare = replace["swap"], replace["old"], replace["spare"]
        self.begin(step)
        with transaction.atomic():
            Node.objects.filter(pk=old.pk).update(
                cluster=None,
                rank=None,
                role=NodeRole.SPARE,
                state=NodeState.OUT_OF_SERVICE,
                link_mode_reason=f"replaced by {spare.name} (operation #{self.op.pk})"[
                    :300
                ],
            )
            Node.objects.filter(pk=spare.pk).update(
                cluster=self.cluster,
                rank=old.rank,
                role=old.role,
                state=NodeState.READY,
            )
        replace["swapped"] = True
        self.replace_state = replace
        self.nodes = self.cluster.ranked_nodes()
        self.finish(
            step,
            f"{spare.name} is rank {old.rank}; {old.name} is out of service until re-admitted",
        )

    def replace_undo(self) -> None:
        """A failed replacement puts the inventory back as it was."""
        replace = getattr(self, "replace_state", None)
        if not replace or not replace.get("swapped"):
            return
        old, spare = replace["old"], replace["spare"]
        with transaction.atomic():
            Node.objects.filter(pk=spare.pk).update(
                cluster=None, rank=None, role=NodeRole.SPARE, state=NodeState.READY
            )
            Node.objects.filter(pk=old.pk).update(
                cluster=self.cluster,
                rank=old.rank,
                role=old.role,
                state=NodeState.READY,
            )
        replace["swapped"] = False
        self.add_step(
            f"Roll back: {old.name} back at rank {old.rank}, {spare.name} back to spare"
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
        if self.op.kind != OperationKind.PREFLIGHT:
            self.cluster.refresh_from_db()
            cluster_set_state(self.cluster, ClusterState.STOPPED)


def run_operation(operation_id: int) -> str:
    """Claim and run one operation, heart-beating while it runs. Returns the final state."""
    op = operation_claim(operation_id)
    if op is None:
        return "not-claimed"
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.OPERATION_HEARTBEAT_S):
                if not operation_heartbeat(operation_id):
                    return
        finally:
            connection.close()

    thread = threading.Thread(
        target=beat, name=f"op-{operation_id}-heartbeat", daemon=True
    )
    thread.start()
    try:
        Runbook(op).run()
    finally:
        stop.set()
        thread.join(timeout=5)
        close_old_connections()
    return Operation.objects.get(pk=operation_id).state
