"""How far an operation is, weighted by how long its steps took in the last runs.

Counting steps makes a 73 s warm-up 1/16 of the bar; weighting each step by its mean
duration over the cluster's last successful runs of the same kind makes the bar and
the ETA honest. Without history every step weighs the same and there is no ETA.
``static/console/js/operation.js`` applies the same rule live from the same figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.utils import timezone

from console.models import Operation, OperationState
from console.models.operations import OperationStep, StepState

HISTORY_RUNS = 5  # the last runs whose step durations set the weights
OPEN_STATES = (StepState.PENDING, StepState.RUNNING)


def expected_durations(op: Operation) -> dict[str, float]:
    """Mean seconds per step name over the last ``HISTORY_RUNS`` succeeded operations of
    ``op``'s kind on ``op``'s cluster (empty when there is no history)."""
    runs = list(
        Operation.objects.filter(
            cluster_id=op.cluster_id, kind=op.kind, state=OperationState.SUCCEEDED
        )
        .exclude(pk=op.pk)
        .order_by("-finished_at")
        .values_list("pk", flat=True)[:HISTORY_RUNS]
    )
    if not runs:
        return {}
    spent: dict[str, list[float]] = defaultdict(list)
    for name, started, finished in OperationStep.objects.filter(
        operation_id__in=runs,
        started_at__isnull=False,
        finished_at__isnull=False,
    ).values_list("name", "started_at", "finished_at"):
        if (
            started is not None and finished is not None
        ):  # filtered above; for the type checker
            spent[name].append(max(0.0, (finished - started).total_seconds()))
    return {name: sum(v) / len(v) for name, v in spent.items()}


def weighted_progress(
    steps: Iterable[OperationStep],
    expected: dict[str, float],
    now: datetime | None = None,
) -> tuple[float, float | None]:
    """(fraction done 0..1, seconds left or None without history).

    Steps of the last runs not created yet count as still to come. A running step counts
    its elapsed time up to 95 % of its expected duration (it is not done until it is).
    """
    now = now or timezone.now()
    steps = list(steps)
    fallback = (sum(expected.values()) / len(expected)) if expected else 1.0
    seen = {s.name for s in steps}
    total = done = 0.0
    left = 0.0
    for s in steps:
        weight = expected.get(s.name, fallback)
        total += weight
        if s.state not in OPEN_STATES:
            done += weight
        elif s.state == StepState.RUNNING and s.started_at is not None:
            elapsed = (now - s.started_at).total_seconds()
            done += min(elapsed, weight * 0.95)
            left += max(weight - elapsed, 0.0)
        else:
            left += weight
    for name, weight in expected.items():
        if name not in seen:
            total += weight
            left += weight
    fraction = done / total if total else 0.0
    return min(fraction, 1.0), (left if expected else None)


def check_groups(checks: list[dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    """A step's preflight checks split for the page: problems first (fail, then warn),
    passes apart so they can stay collapsed."""
    order = {"fail": 0, "warn": 1}
    problems = sorted(
        (c for c in checks if c.get("status") != "pass"),
        key=lambda c: order.get(str(c.get("status")), 0),
    )
    return {
        "problems": problems,
        "passed": [c for c in checks if c.get("status") == "pass"],
    }
