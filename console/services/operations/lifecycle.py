"""An operation's lifecycle once requested: claim, heartbeat, cancel, terminate (the one
place one finishes) and the reaping of operations whose control worker died.

Separate from the request (start.py): these are the conditional UPDATEs of the
Operation row's state machine, each audited in the same transaction.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from console.models import AuditEvent, ClusterState
from console.models.operations import (
    ACTIVE_STATES,
    Operation,
    OperationKind,
    OperationState,
    OperationStep,
    StepState,
)
from console.services.audit import audit_record
from console.services.operations.push import cluster_set_state, operation_publish
from console.signals import operation_finished, send_on_commit


def operation_claim(operation_id: int) -> Operation | None:
    """Move a queued operation to running (conditional UPDATE); None when someone else has it."""
    now = timezone.now()
    updated = Operation.objects.filter(
        pk=operation_id, state=OperationState.QUEUED
    ).update(state=OperationState.RUNNING, started_at=now, heartbeat_at=now)
    if updated != 1:
        return None
    op = Operation.objects.select_related("cluster", "cluster__profile").get(
        pk=operation_id
    )
    operation_publish(op)
    return op


def operation_heartbeat(operation_id: int) -> bool:
    """Refresh the liveness stamp of a running operation; False once it is finished."""
    return (
        Operation.objects.filter(pk=operation_id, finished_at__isnull=True).update(
            heartbeat_at=timezone.now()
        )
        == 1
    )


def operation_cancel(
    *, operation: Operation, user: Any, request: Any = None
) -> Operation:
    """Ask a queued or running operation to stop; a running one rolls back after its current step."""
    who = getattr(user, "username", "system")
    with transaction.atomic():  # the cancel and its audit row, or neither
        if operation.state == OperationState.QUEUED:
            operation_terminate(
                operation,
                OperationState.CANCELLED,
                error="cancelled before it started",
                params={**operation.params, "cancel_requested": who},
                only_if=OperationState.QUEUED,
            )
        elif operation.state == OperationState.RUNNING:
            params = {**operation.params, "cancel_requested": who}
            Operation.objects.filter(pk=operation.pk).update(params=params)
        audit_record(
            action="operation.cancel", actor=user, request=request, target=operation
        )
    operation.refresh_from_db()
    operation_publish(operation)
    return operation


def operation_terminate(
    operation: Operation,
    state: str,
    *,
    error: str = "",
    result: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    only_if: str | None = None,
) -> bool:
    """Finish an operation exactly once (conditional UPDATE): the one place one finishes.

    Audits the outcome, pushes it, and announces ``console.signals.operation_finished``
    after commit (an incident's operation moves the incident on). ``only_if`` finishes
    it only from that state (a queued operation cancelled before a worker claims it).
    """
    updates: dict[str, Any] = {
        "state": state,
        "finished_at": timezone.now(),
        "error": error[:5000],
    }
    if result is not None:
        updates["result"] = result
    if params is not None:
        updates["params"] = params
    with transaction.atomic():  # the outcome and its audit row, or neither
        unfinished = Operation.objects.filter(pk=operation.pk, finished_at__isnull=True)
        if only_if is not None:
            unfinished = unfinished.filter(state=only_if)
        if unfinished.update(**updates) != 1:
            return False
        operation.refresh_from_db()
        audit_record(
            action=f"operation.{operation.kind}.finish",
            actor=operation.requested_by,
            target=operation,
            after={"state": state, "error": error[:500]},
            result=AuditEvent.Result.SUCCESS
            if state == OperationState.SUCCEEDED
            else AuditEvent.Result.FAILURE,
        )
    operation_publish(operation)
    send_on_commit(operation_finished, Operation, operation_id=operation.pk)
    return True


def operation_reap_interrupted(now: Any = None) -> list[int]:
    """Mark operations whose control worker stopped heart-beating as interrupted.

    Running: no heartbeat for OPERATION_STALE_S. Queued: not picked up for
    OPERATION_QUEUE_STALE_S (no control worker at all). Returns the reaped ids.
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.OPERATION_STALE_S)
    queue_stale = now - timedelta(seconds=settings.OPERATION_QUEUE_STALE_S)
    reaped: list[int] = []
    candidates = (
        Operation.objects.filter(finished_at__isnull=True)
        .filter(state__in=ACTIVE_STATES)
        .select_related("cluster")
    )
    for op in candidates:
        if (
            op.state == OperationState.RUNNING
            and op.heartbeat_at
            and op.heartbeat_at >= stale
        ):
            continue
        if op.state == OperationState.QUEUED and op.created_at >= queue_stale:
            continue
        message = (
            _(
                "The control worker stopped responding (no heartbeat for {s} s); what it started may still run: the next start cleans up."
            ).format(s=settings.OPERATION_STALE_S)
            if op.state == OperationState.RUNNING
            else _("No control worker picked this operation up within {s} s.").format(
                s=settings.OPERATION_QUEUE_STALE_S
            )
        )
        if operation_terminate(op, OperationState.INTERRUPTED, error=message):
            OperationStep.objects.filter(operation=op, state=StepState.RUNNING).update(
                state=StepState.FAILED, finished_at=now, summary=message[:500]
            )
            if op.kind in (
                OperationKind.START,
                OperationKind.RESTART,
                OperationKind.FAILOVER,
                OperationKind.STOP,
                OperationKind.SCALE_OUT,
                OperationKind.REPLACE,
            ):
                cluster_set_state(op.cluster, ClusterState.FAILED)
            reaped.append(op.pk)
    return reaped
