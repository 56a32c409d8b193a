"""The runbook tables: every kind reads as one list of steps, and the runner walks it the
same way for all of them (rows first, then the work; on failure the undo of every step
that began, latest first)."""

from __future__ import annotations

from typing import Any

import pytest

from console.models.operations import Operation, OperationKind, StepState
from console.services.runbooks import RUNBOOKS, Run, Step, execute
from console.services.runbooks import table as tables
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db


def _op(kind: str) -> Operation:
    return Operation.objects.create(
        cluster=make_cluster("rb", nodes=2),
        kind=kind,
        state="running",
        requested_by_name="test",
    )


def _recording(name: str, log: list[str], *, fails: bool = False) -> Step:
    def plan(run: Run) -> Any:
        log.append(f"plan {name}")
        return run.add_step(name)

    def work(run: Run, row: Any) -> None:
        log.append(f"run {name}")
        run.begin(row)
        if fails:
            raise run.fail(row, "broken")
        run.finish(row, "done")

    return Step(name, plan=plan, run=work, undo=lambda run: log.append(f"undo {name}"))


def test_it_creates_every_row_first_then_undoes_what_began_latest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    steps = (
        _recording("a", log),
        _recording("b", log, fails=True),
        _recording("c", log),
    )
    monkeypatch.setitem(RUNBOOKS, OperationKind.STOP, steps)
    op = _op(OperationKind.STOP)
    execute(Run(op))
    assert log == [
        "plan a",
        "plan b",
        "plan c",
        "run a",
        "run b",
        "undo b",
        "undo a",
    ]  # c never began: nothing of it is undone
    op.refresh_from_db()
    assert op.state == "failed" and op.error == "b: broken"
    states = dict(op.steps.values_list("name", "state"))
    assert states == {
        "a": StepState.SUCCEEDED,
        "b": StepState.FAILED,
        "c": StepState.SKIPPED,
    }


def test_every_kind_that_starts_engines_rolls_them_back_and_a_replace_restores_the_inventory() -> (
    None
):
    for kind, steps in RUNBOOKS.items():
        if tables.START_RANKS in steps:
            assert tables.START_RANKS.undo is not None, kind
            assert steps.index(tables.PREFLIGHT) < steps.index(tables.START_RANKS)
    replace = RUNBOOKS[OperationKind.REPLACE]
    assert replace.index(tables.SPARE_PREFLIGHT) < replace.index(tables.STOP_FIRST)
    assert replace.index(tables.STOP_FIRST) < replace.index(tables.SWAP_SPARE_IN)
    assert tables.SWAP_SPARE_IN.undo is not None


def test_a_kind_without_a_table_fails_saying_so() -> None:
    op = _op(OperationKind.SCALE_OUT)
    execute(Run(op))
    op.refresh_from_db()
    assert (
        op.state == "failed"
        and op.error == "scale_out is not implemented by this runbook"
    )
