"""Requesting an operation: operation_start, the checks that refuse one, its audited
insert, the answer to a conflict, and the enqueue for the control worker.

Separate from the lifecycle (lifecycle.py): everything here happens before a worker
claims the row; the refusals (OperationRefused, OperationConflict) are its answers.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from console.models import AuditEvent, Cluster, ClusterState
from console.models.operations import Operation, OperationKind
from console.permissions import has_role
from console.services.audit import audit_record
from console.services.bench_runs import BenchRequestInvalid, bench_request
from console.services.operations.lifecycle import operation_reap_interrupted


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
