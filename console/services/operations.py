"""Writes around operations: request one, record its lifecycle, reap dead ones.

The runbooks themselves (what each kind does, step by step) live in
console.services.runbooks; this module owns the Operation rows' state machine.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from console.live import publish
from console.models import AuditEvent, Cluster, ClusterState
from console.models.operations import (
    ACTIVE_STATES,
    Operation,
    OperationKind,
    OperationState,
    OperationStep,
    StepState,
)
from console.permissions import has_role
from console.services.audit import audit_record
from console.services.bench_runs import BenchRequestInvalid, bench_request
from console.signals import operation_finished, send_on_commit


class OperationConflict(Exception):
    """Another operation is active on the cluster; ``running`` names it."""

    def __init__(self, running: Operation) -> None:
        self.running = running
        super().__init__(
            _(
                "Operation #{id} ({kind}, {state}, requested by {user}) is still active on {cluster}; wait for it to finish or cancel it."
            ).format(
                id=running.pk,
                kind=running.get_kind_display(),
                state=running.get_state_display(),
                user=running.requested_by_name,
                cluster=running.cluster.name,
            )
        )


class OperationRefused(Exception):
    """The request is not allowed (role, kind, force without admin); ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def _bench_params(cluster: Cluster, params: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's sweep, checked (OperationRefused names the field); serving clusters only."""
    cluster.refresh_from_db(fields=["state"])
    if cluster.state not in (ClusterState.RUNNING, ClusterState.DEGRADED):
        raise OperationRefused(
            "kind",
            _(
                "{cluster} is {state}: a benchmark needs a serving cluster; start it first."
            ).format(cluster=cluster.name, state=cluster.get_state_display()),
        )
    profile = cluster.profile
    default = (
        (profile.target_input_len or 512, profile.target_output_len or 256)
        if profile
        else (512, 256)
    )
    try:
        bench = bench_request(params.get("bench") or {}, default_shape=default)
    except BenchRequestInvalid as exc:
        raise OperationRefused(exc.field, str(exc)) from None
    if bench["target"] == "gateway" and not settings.BENCH_GATEWAY_URL:
        raise OperationRefused(
            "target",
            _(
                "Set BENCH_GATEWAY_URL to the console's address as the nodes reach it (e.g. http://10.0.0.5:8000), or benchmark the head."
            ),
        )
    return bench


def operation_group(operation_id: int) -> str:
    return f"operation-{operation_id}"


def cluster_group(cluster_id: int) -> str:
    return f"cluster-{cluster_id}"


def operation_start(
    *,
    cluster: Cluster,
    kind: str,
    user: Any = None,
    reason: str = "",
    source: str = "ui",
    source_ip: str | None = None,
    force: bool = False,
    params: dict[str, Any] | None = None,
    request: Any = None,
    actor: str = "",
) -> Operation:
    """Create an operation and queue it for the control worker.

    Raises OperationRefused (bad kind, force without admin) or OperationConflict
    (another operation is active: the database's partial unique index decides).
    """
    _check_kind_and_force(kind=kind, user=user, source=source, force=force)
    operation_reap_interrupted()
    params = _check_cluster_state(cluster, kind, params)
    actor_name = getattr(user, "username", "") or actor or "system"
    try:
        op = _operation_create_audited(
            cluster=cluster,
            kind=kind,
            user=user,
            actor_name=actor_name,
            reason=reason,
            source=source,
            source_ip=source_ip,
            force=force,
            params=params,
            request=request,
        )
    except IntegrityError:
        running = _conflict_record(
            cluster=cluster, kind=kind, user=user, request=request, source_ip=source_ip
        )
        if running is None:
            # it finished between the insert and the lookup: let the caller retry
            raise
        raise OperationConflict(running) from None
    _operation_enqueue(op)
    return op


def _check_kind_and_force(*, kind: str, user: Any, source: str, force: bool) -> None:
    """Refuse an unknown kind, and a force the requester may not use or the kind ignores."""
    if kind not in OperationKind.values:
        raise OperationRefused(
            "kind",
            _("Unknown kind {kind!r}; use one of {kinds}.").format(
                kind=kind, kinds=", ".join(OperationKind.values)
            ),
        )
    # The CLI runs with the server's own credentials (shell access = admin); everyone else needs the role.
    if force and source != "cli" and (user is None or not has_role(user, "admin")):
        raise OperationRefused(
            "force", _("Only an admin may force a start past a failed preflight.")
        )
    if force and kind not in (OperationKind.START, OperationKind.RESTART):
        raise OperationRefused("force", _("force applies to start and restart only."))


def _check_cluster_state(
    cluster: Cluster, kind: str, params: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Refuse a kind the cluster's state forbids; the params, with a benchmark's sweep checked."""
    if kind == OperationKind.PREFLIGHT:
        cluster.refresh_from_db(fields=["state"])
        if cluster.state in (ClusterState.RUNNING, ClusterState.DEGRADED):
            # Its own engines hold the NPUs' HBM and bind the ports: every check would
            # flag them as faults, with advice to kill production (issue 21, point 4).
            raise OperationRefused(
                "kind",
                _(
                    "{cluster} is {state}: preflight would report its own engines' NPUs and ports as faults. Stop it first; a restart runs preflight after the drain."
                ).format(cluster=cluster.name, state=cluster.get_state_display()),
            )
    if kind == OperationKind.BENCHMARK:
        params = {**(params or {}), "bench": _bench_params(cluster, params or {})}
    if kind == OperationKind.START:
        cluster.refresh_from_db(fields=["state"])
        if cluster.state in (ClusterState.RUNNING, ClusterState.DEGRADED):
            # Its "Clear leftover engines" step would kill the serving engines undrained.
            raise OperationRefused(
                "kind",
                _(
                    "{cluster} is already {state}; a start would stop its engines without draining them. Use restart (drains first) or stop."
                ).format(cluster=cluster.name, state=cluster.get_state_display()),
            )
    return params


def _operation_create_audited(
    *,
    cluster: Cluster,
    kind: str,
    user: Any,
    actor_name: str,
    reason: str,
    source: str,
    source_ip: str | None,
    force: bool,
    params: dict[str, Any] | None,
    request: Any,
) -> Operation:
    """Insert the operation row and its audit row in one transaction.

    Raises IntegrityError when another operation is active on the cluster.
    """
    with transaction.atomic():
        op = Operation.objects.create(
            cluster=cluster,
            kind=kind,
            requested_by=user if getattr(user, "pk", None) else None,
            requested_by_name=actor_name,
            source=source,
            reason=reason[:500],
            force=force,
            params=params or {},
        )
        # the row and its audit row commit together: an audit write that fails
        # leaves no orphan queued operation behind
        audit_record(
            action=f"operation.{kind}",
            actor=user,
            request=request,
            source_ip=source_ip,
            target=op,
            after={
                "cluster": cluster.name,
                "kind": kind,
                "reason": reason,
                "force": force,
                "params": params or {},
            },
        )
    return op


def _conflict_record(
    *, cluster: Cluster, kind: str, user: Any, request: Any, source_ip: str | None
) -> Operation | None:
    """Audit a start refused by the active operation; that operation, or None once it finished."""
    running = (
        Operation.objects.filter(cluster=cluster, finished_at__isnull=True)
        .select_related("cluster")
        .first()
    )
    audit_record(
        action=f"operation.{kind}",
        actor=user,
        request=request,
        source_ip=source_ip,
        target=cluster,
        result=AuditEvent.Result.DENIED,
        message="another operation is active",
    )
    return running


def _operation_enqueue(op: Operation) -> None:
    """Queue the operation's run for the control worker once the row commits."""
    # Late: console.tasks imports the runbooks, which import this module.
    from console.tasks import operation_run_task

    transaction.on_commit(
        lambda: operation_run_task.apply_async(kwargs={"operation_id": op.pk})
    )


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


def cluster_set_state(cluster: Cluster, state: str) -> None:
    """Record and push a cluster state change."""
    if cluster.state == state:
        return
    Cluster.objects.filter(pk=cluster.pk).update(
        state=state, state_changed_at=timezone.now()
    )
    cluster.state = state
    label = str(ClusterState(state).label)
    transaction.on_commit(
        lambda: publish(
            cluster_group(cluster.pk),
            "cluster.state",
            {
                "cluster": cluster.pk,
                "state": state,
                "label": label,
                "color": cluster.state_color,
            },
        )
    )


def operation_publish(op: Operation, step: OperationStep | None = None) -> None:
    """Push the operation's state (and a changed step) to its page and its cluster's page."""
    done, total = op.progress()
    payload: dict[str, Any] = {
        "operation": op.pk,
        "cluster": op.cluster_id,
        "kind": op.kind,
        "state": op.state,
        "state_label": str(op.get_state_display()),
        "color": op.state_color,
        "error": op.error,
        "progress": [done, total],
        "duration_s": op.duration_s,
    }
    if step is not None:
        payload["step"] = step.to_dict()
    for group in (operation_group(op.pk), cluster_group(op.cluster_id)):
        transaction.on_commit(
            functools.partial(publish, group, "operation.progress", payload)
        )
