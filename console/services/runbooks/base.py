"""The run context every step works on: the operation's step rows, what it started, what to undo.

Also the ground every step stands on: cancellation, agent calls (one or many at once),
the launch plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.celery import app, node_queue
from console.models import Cluster, Node
from console.models.operations import (
    Operation,
    OperationStep,
    StepState,
)
from console.opsmessages import english_text
from console.services.agents import AgentUnreachable, agent_call, result_wait
from console.services.operations import (
    operation_publish,
)
from console.services.plans import cluster_plan, node_spec
from engine.diagnose import diagnose
from engine.plans import ClusterPlan


class StepFailed(Exception):
    """A step could not complete; the runbook rolls back what it started."""


class Cancelled(Exception):
    """An operator cancelled the operation."""


class Run:
    """One operation being run: the small state its steps share.

    ``nodes`` are the ranks the next step works on (a replace swaps them), ``steps``
    the rows the operator watches, ``started_nodes`` the engines this run started (rolled back, in reverse, on
    failure), ``unconfirmed_down`` the ranks a stop could not confirm down, ``replace``
    the spare swap in progress, ``result`` what the operation reports.
    """

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.cluster: Cluster = op.cluster
        self.nodes: list[Node] = self.cluster.ranked_nodes()
        self.steps: list[OperationStep] = []
        self.started_nodes: list[Node] = []  # for rollback, in start order
        self.unconfirmed_down: list[str] = []  # nodes a stop could not confirm down
        self.plan: ClusterPlan | None = None
        # the model's config.json as most nodes report it at preflight (fit estimate)
        self.model_config: dict[str, Any] | None = None
        self.replace: dict[str, Any] | None = None
        # failover: the verified node's two collect samples before the change (remedies.py)
        self.link_baseline: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.result: dict[str, Any] = {}

    # -- step bookkeeping -----------------------------------------------------------

    def add_step(self, name: str, node: Node | None = None) -> OperationStep:
        step = OperationStep.objects.create(
            operation=self.op, seq=len(self.steps) + 1, name=name, node=node
        )
        self.steps.append(step)
        return step

    def step_update(self, step: OperationStep, **fields: Any) -> None:
        """Save and publish. A ``summary`` given as a message dict (opsmessages.message)
        is stored in English and, as it is, under ``data["summary_msg"]``, so the page
        shows it in the reader's language; a plain string drops an older one."""
        if "summary" in fields:
            summary = fields["summary"]
            data = dict(fields.get("data", step.data) or {})
            data.pop("summary_msg", None)
            if isinstance(summary, dict):
                data["summary_msg"] = summary
                summary = english_text(summary)
            fields["summary"] = summary[:500]
            fields["data"] = data
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
        summary: str | dict[str, Any],
        state: str = StepState.SUCCEEDED,
        **fields: Any,
    ) -> None:
        self.step_update(
            step,
            state=state,
            finished_at=timezone.now(),
            summary=summary,
            **fields,
        )

    def fail(
        self,
        step: OperationStep,
        summary: str | dict[str, Any],
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
        return StepFailed(f"{step.name}: {step.summary}")

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
                answers[name] = result_wait(
                    result, max(0.1, deadline - time.monotonic())
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
        return cluster_plan(self.cluster, nodes=specs, model_config=self.model_config)

    def head(self) -> Node:
        return self.nodes[0]

    def head_url(self) -> str:
        head = self.head()
        return f"http://{head.management_ip}:{head.api_port}"
