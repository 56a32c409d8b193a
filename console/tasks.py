"""Control-side Celery tasks: thin adapters over services (STYLE §2)."""

from __future__ import annotations

from django.conf import settings

from console.celery import app
from console.models import Cluster, EvidenceTrigger
from console.services.evidence import evidence_collect
from console.services.operations import operation_reap_interrupted
from console.services.runbooks import run_operation


@app.task(
    name="operations.run",
    time_limit=settings.OPERATION_TIME_LIMIT_S,
    soft_time_limit=settings.OPERATION_TIME_LIMIT_S - 30,
    acks_late=False,
)
def operation_run_task(operation_id: int) -> str:
    """Run one operation's runbook on the control worker.

    Finishing it announces ``console.signals.operation_finished`` (listeners such as
    remediation react there, not here).
    """
    return run_operation(operation_id)


@app.task(name="operations.reap")
def operation_reap_task() -> list[int]:
    """Mark operations whose control worker died as interrupted (beat, every 15 s)."""
    return operation_reap_interrupted()


@app.task(name="evidence.collect")
def evidence_collect_task(
    cluster_id: int,
    incident_id: int | None = None,
    user_id: int | None = None,
    trigger: str = "manual",
) -> int | None:
    """Collect an evidence bundle from every node of a cluster (on demand, or after an
    engine exited); returns its id."""
    from django.contrib.auth import get_user_model

    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    if trigger not in EvidenceTrigger.values:
        trigger = EvidenceTrigger.MANUAL
    if trigger == EvidenceTrigger.ENGINE_EXITED:
        reason = "an engine exited"
    else:
        reason = f"on demand by {user.get_username()}" if user else "on demand"
    bundle = evidence_collect(
        cluster=cluster,
        trigger=trigger,
        reason=reason,
        incident_id=incident_id,
        user=user,
    )
    return bundle.pk
