"""Control-side Celery tasks: thin adapters over services (STYLE §2)."""

from __future__ import annotations

from django.conf import settings

from console.celery import app
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
