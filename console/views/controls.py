"""Which operation buttons the cluster page offers, and why the others are off.

The services refuse what cannot run (``operation_start``); this module only decides what
the page *offers*, so an operator never meets a refusal after a confirm dialog. Each
button carries the reason it is disabled, shown on hover.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _

from console.models import Cluster, ClusterState, Operation, OperationKind

# Cluster states in which each manually started kind makes sense.
ALLOWED: dict[str, tuple[str, ...]] = {
    # Start on a serving cluster would clear its engines undrained (operation_start refuses it).
    OperationKind.START: (ClusterState.STOPPED, ClusterState.FAILED),
    OperationKind.STOP: (
        ClusterState.RUNNING,
        ClusterState.DEGRADED,
        ClusterState.FAILED,
    ),
    OperationKind.RESTART: (
        ClusterState.RUNNING,
        ClusterState.DEGRADED,
        ClusterState.FAILED,
    ),
    # Preflight on a serving cluster reports its own engines' NPUs and ports as faults.
    OperationKind.PREFLIGHT: (ClusterState.STOPPED, ClusterState.FAILED),
    # Only reads the model files (bounded IO), so a serving cluster may verify too.
    OperationKind.VERIFY_WEIGHTS: (
        ClusterState.STOPPED,
        ClusterState.FAILED,
        ClusterState.RUNNING,
        ClusterState.DEGRADED,
    ),
}

# How each button looks: one primary action, Stop outlined (dangerous, never the loudest).
STYLE: dict[str, str] = {
    OperationKind.START: "primary",
    OperationKind.STOP: "danger",
    OperationKind.RESTART: "secondary",
    OperationKind.PREFLIGHT: "secondary",
    OperationKind.VERIFY_WEIGHTS: "secondary",
}


@dataclass(frozen=True)
class Control:
    """One operation button: its kind, label, whether it is offered, and why not."""

    kind: str
    label: str
    enabled: bool
    reason: str
    style: str


def _why_not(kind: str, cluster: Cluster) -> str:
    state = cluster.get_state_display()
    if kind == OperationKind.START:
        if cluster.state in (ClusterState.RUNNING, ClusterState.DEGRADED):
            return _(
                "{cluster} is already {state}: use Restart (drains first) or Stop."
            ).format(cluster=cluster.name, state=state)
    elif kind in (OperationKind.STOP, OperationKind.RESTART):
        if cluster.state == ClusterState.STOPPED:
            return _("{cluster} is stopped: use Start.").format(cluster=cluster.name)
    elif kind == OperationKind.PREFLIGHT:
        if cluster.state in (ClusterState.RUNNING, ClusterState.DEGRADED):
            return _(
                "{cluster} is serving: preflight would report its own engines as faults. Stop it first."
            ).format(cluster=cluster.name)
    return _("Not available while {cluster} is {state}.").format(
        cluster=cluster.name, state=state
    )


def operation_controls(cluster: Cluster, active: Operation | None) -> list[Control]:
    """The Preflight / Start / Stop / Restart buttons for ``cluster`` in its current state."""
    out = []
    for kind in (
        OperationKind.PREFLIGHT,
        OperationKind.START,
        OperationKind.STOP,
        OperationKind.RESTART,
        OperationKind.VERIFY_WEIGHTS,
    ):
        if active is not None:
            enabled = False
            reason = _(
                "Operation #{id} ({kind}) is running; wait for it or cancel it."
            ).format(id=active.pk, kind=active.get_kind_display())
        else:
            enabled = cluster.state in ALLOWED[kind]
            reason = "" if enabled else _why_not(kind, cluster)
        out.append(
            Control(
                kind=str(kind),
                label=str(OperationKind(kind).label),
                enabled=enabled,
                reason=reason,
                style=STYLE[kind],
            )
        )
    return out
