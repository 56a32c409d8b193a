"""Walks a runbook table (console.services.runbooks.table) for one operation."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from console.models.operations import Operation, OperationState, StepState
from console.services.evidence import evidence_for_runbook
from console.services.operations import (
    operation_claim,
    operation_heartbeat,
    operation_terminate,
)
from console.services.runbooks.base import Cancelled, Run, StepFailed
from console.services.runbooks.lifecycle import leave_stopped, skip_pending
from console.services.runbooks.table import RUNBOOKS, Step

log = logging.getLogger(__name__)


def execute(run: Run) -> None:
    """Plan every step of the kind's table, run them in order; on failure or cancel, unwind."""
    if not run.nodes:
        operation_terminate(
            run.op, OperationState.FAILED, error="the cluster has no nodes"
        )
        return
    # issue 19: an incident's remedy first keeps the dead engine's evidence
    evidence_for_runbook(run.op, run.nodes, failed=False)
    began: list[Step] = []
    try:
        table = RUNBOOKS.get(run.op.kind)
        if table is None:
            raise StepFailed(f"{run.op.kind} is not implemented by this runbook")
        steps = [step for step in table if step.when(run)]
        rows = [step.plan(run) for step in steps]
        for step, its_rows in zip(steps, rows, strict=True):
            began.append(step)
            step.run(run, its_rows)
    except Cancelled as exc:
        _unwind(run, began)
        operation_terminate(
            run.op, OperationState.CANCELLED, error=str(exc), result=run.result
        )
        return
    except Exception as exc:
        if not isinstance(exc, StepFailed):
            log.exception("operation %s crashed", run.op.pk)
            for row in run.steps:
                if row.state == StepState.RUNNING:
                    run.fail(row, f"internal error: {exc!r}")
        # issue 19: every node's evidence, before the rollback stops engines
        evidence_for_runbook(run.op, run.nodes, failed=True)
        _unwind(run, began)
        operation_terminate(
            run.op, OperationState.FAILED, error=str(exc), result=run.result
        )
        return
    skip_pending(run)
    operation_terminate(run.op, OperationState.SUCCEEDED, result=run.result)


def _unwind(run: Run, began: list[Step]) -> None:
    """Undo the steps that began, latest first; skip the rest; leave the cluster stopped."""
    for step in reversed(began):
        if step.undo is not None:
            step.undo(run)
    skip_pending(run)
    leave_stopped(run)


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
        execute(Run(op))
    except Exception as exc:
        # the run could not even set up: finish it, so listeners hear of it
        log.exception("operation %s crashed before its steps", operation_id)
        operation_terminate(op, OperationState.FAILED, error=f"internal error: {exc!r}")
    finally:
        stop.set()
        thread.join(timeout=5)
        close_old_connections()
    return Operation.objects.get(pk=operation_id).state
