"""The correctness gate: ask the bundled samples through the head's chat API, judge, record.

``acceptance_gate(cluster)`` is the one call a runbook makes after start, restart,
failover and replace, before the cluster is marked serving: it returns a
:class:`GateResult` whose ``blocks_serving`` says whether to stop there (policy
"enforce" and the gate failed). Scoring is pure (engine.gate); this module does the
HTTP, the GateRun row, the audit row (one transaction) and the signal after commit.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.engine_auth import engine_headers
from console.models import Cluster, Node, NodeRole
from console.models.acceptance import GatePolicy, GateRun
from console.models.audit import AuditEvent
from console.services.audit import audit_record
from console.signals import gate_finished
from engine import gate


@dataclass(frozen=True)
class GateResult:
    """What the gate decided. ``run`` is None when the policy is off and nothing was asked."""

    policy: str
    passed: bool
    reason: str
    run: GateRun | None

    @property
    def blocks_serving(self) -> bool:
        """True when the runbook must stop short of "serving" (policy enforce, gate failed)."""
        return self.policy == GatePolicy.ENFORCE and not self.passed

    def lines(self) -> list[str]:
        """One line per failing sample (id, answer head, first problem), for an operation step's detail."""
        if self.run is None:
            return []
        return [
            f"{s['id']}: {(s['problems'] or ['wrong answer'])[0]} | {' '.join(s['answer'].split())[:120]!r}"
            for s in self.run.samples
            if not s.get("passed")
        ]

    @property
    def failing_samples(self) -> list[str]:
        if self.run is None:
            return []
        return [s["id"] for s in self.run.samples if not s.get("passed")]


def head_url(cluster: Cluster) -> str:
    """Base URL of the cluster's head API server (rank 0). Raises ValueError without one."""
    head = (
        Node.objects.filter(cluster=cluster)
        .exclude(role=NodeRole.SPARE)
        .exclude(rank=None)
        .order_by("rank")
        .first()
    )
    if head is None:
        raise ValueError(
            f"cluster {cluster.name} has no rank-0 node; assign ranks first"
        )
    return f"http://{head.management_ip}:{head.api_port}"


def _ask(
    client: httpx.Client, url: str, model: str, sample: gate.Sample
) -> gate.SampleResult:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": sample.prompt}],
        "max_tokens": gate.MAX_TOKENS,
        "temperature": 0,  # greedy: a correct engine gives the same answer every time
        # Qwen3-family templates think by default; the gate wants the answer itself
        # (qwen.readthedocs.io deployment/vllm "thinking & non-thinking modes")
        "chat_template_kwargs": {"enable_thinking": False},
    }
    try:
        response = client.post(f"{url}/v1/chat/completions", json=body)
        response.raise_for_status()
        choice = response.json()["choices"][0]
        answer = str(choice["message"].get("content") or "")
        finish = choice.get("finish_reason")
    except (httpx.HTTPError, KeyError, IndexError, ValueError, TypeError) as exc:
        result = gate.score(sample, "", None)
        result.problems = [f"request failed: {str(exc)[:200]}"]
        return result
    return gate.score(sample, answer, finish)


def gate_ask(cluster: Cluster, *, base_url: str | None = None) -> gate.Verdict:
    """Send every bundled sample to the cluster's head and judge the answers (no writes)."""
    url = base_url or head_url(cluster)
    profile = cluster.profile
    with httpx.Client(
        timeout=settings.GATE_TIMEOUT_S, headers=engine_headers(cluster.name)
    ) as client:
        with ThreadPoolExecutor(max_workers=len(gate.SAMPLES)) as pool:
            results = list(
                pool.map(
                    lambda s: _ask(client, url, profile.served_model_name, s),
                    gate.SAMPLES,
                )
            )
    return gate.verdict(results, profile.gate_baseline_accuracy, profile.gate_threshold)


def acceptance_gate(
    cluster: Cluster,
    *,
    trigger: str = "manual",
    actor: Any = None,
    request: HttpRequest | None = None,
    base_url: str | None = None,
) -> GateResult:
    """Run the correctness gate on ``cluster`` and record it (GateRun + audit row, one transaction).

    With policy "off" an automatic trigger (start/restart/failover/replace) asks nothing
    and passes; a manual run always asks. After commit ``console.signals.gate_finished``
    fires (monitoring raises/resolves the gate alert from it).
    """
    policy = cluster.gate_policy
    if policy == GatePolicy.OFF and trigger != "manual":
        if cluster.gate_blocked:  # the gate was turned off: nothing holds it out now
            Cluster.objects.filter(pk=cluster.pk).update(gate_blocked=False)
            cluster.gate_blocked = False
        return GateResult(policy, True, "gate off for this cluster", None)
    started = timezone.now()
    verdict = gate_ask(cluster, base_url=base_url)
    with transaction.atomic():
        run = GateRun.objects.create(
            cluster=cluster,
            trigger=trigger[:16],
            policy=policy,
            passed=verdict.passed,
            accuracy=verdict.accuracy,
            baseline=verdict.baseline,
            threshold=verdict.threshold,
            reason=verdict.reason[:300],
            samples=[r.to_dict() for r in verdict.results],
            started_at=started,
            finished_at=timezone.now(),
            requested_by=actor if getattr(actor, "pk", None) else None,
        )
        failing = ", ".join(r.id for r in verdict.failing)
        audit_record(
            action="cluster.gate",
            actor=actor,
            request=request,
            target=cluster,
            after={
                "gate_run": run.pk,
                "trigger": trigger,
                "policy": policy,
                "passed": verdict.passed,
                "accuracy": round(verdict.accuracy, 4),
                "failing": failing,
            },
            result=AuditEvent.Result.SUCCESS
            if verdict.passed
            else AuditEvent.Result.FAILURE,
            message=verdict.reason[:300],
        )
        # enforce: a failing cluster serves nobody through the gateway until a gate
        # passes (inside a start the runbook also keeps it from Running)
        blocked = policy == GatePolicy.ENFORCE and not verdict.passed
        if cluster.gate_blocked != blocked:
            Cluster.objects.filter(pk=cluster.pk).update(gate_blocked=blocked)
            cluster.gate_blocked = blocked
        transaction.on_commit(lambda: gate_finished.send(sender=GateRun, gate_run=run))
    return GateResult(policy, verdict.passed, verdict.reason, run)
