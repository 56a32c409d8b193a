"""What each operation kind does, in order, with its rollbacks: read this file first.

A runbook is one row of ``RUNBOOKS``: the steps of its kind, in order. Each ``Step``
``plan``s first (every step of the table creates the rows the operator watches before
any work starts, so progress has a known total), then ``run``s. When a step fails or
the operator cancels, the ``undo`` of every step that began runs in reverse order, the
rows still pending are skipped, and the cluster is left Stopped (Failed when a rank could
not be confirmed down). ``console.services.runbooks.runner`` walks the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.models import ClusterState
from console.models.operations import OperationKind, StepState
from console.services.acceptance import acceptance_gate
from console.services.operations import cluster_set_state
from console.services.runbooks.base import Run, StepFailed
from console.services.runbooks.bench import bench_rows, run_bench
from console.services.runbooks.lifecycle import (
    after_start,
    rollback,
    run_cleanup,
    run_start,
    run_stop,
    start_steps,
    stop_steps,
)
from console.services.runbooks.preflight import preflight_steps, run_preflight
from console.services.runbooks.remedies import (
    link_baseline,
    record_failed_links,
    replace_prepare,
    replace_spare_preflight,
    replace_swap,
    replace_undo,
    verify_link_switch,
)
from console.services.runbooks.weights import run_weights, weights_rows


def _no_rows(run: Run) -> None:
    return None


def _always(run: Run) -> bool:
    return True


@dataclass(frozen=True)
class Step:
    """One entry of a runbook: rows it creates up front, the work, what undoes it."""

    name: str
    plan: Callable[[Run], Any] = _no_rows
    run: Callable[[Run, Any], None] = lambda run, rows: None
    undo: Callable[[Run], None] | None = None
    when: Callable[[Run], bool] = _always


# -- the steps ------------------------------------------------------------------------


def _preflight_gate(run: Run, rows: Any) -> None:
    if not run_preflight(run, rows):
        if not run.op.force:
            raise StepFailed(
                "preflight failed; fix the failing checks (or have an admin force the start)"
            )
        run.add_step("Preflight failed but an admin forced the start")
    if run.plan is None:
        raise StepFailed("no valid launch plan")


def _preflight_report(run: Run, rows: Any) -> None:
    if not run_preflight(run, rows):
        raise StepFailed("preflight found problems")


def _spare_preflight(run: Run, row: Any) -> None:
    replace_spare_preflight(run, row)
    assert run.replace is not None
    run.nodes = run.replace["old_nodes"]  # the stop that follows stops today's ranks


def _swap_rows(run: Run) -> Any:
    assert run.replace is not None
    replace = run.replace
    row = run.add_step(
        f"Swap {replace['old'].name} for {replace['spare'].name} in the inventory"
    )
    run.nodes = replace[
        "new_nodes"
    ]  # the preflight and start rows that follow name the spare
    return row


def _verify_node(run: Run) -> str:
    return str(run.op.params.get("verify_node") or "")


CLEAR_LEFTOVERS = Step(
    "clear leftover engines",
    plan=lambda run: run.add_step("Clear leftover engines"),
    run=run_cleanup,
)
STOP = Step("drain, then stop in reverse rank order", plan=stop_steps, run=run_stop)
STOP_FIRST = Step(
    "drain, then stop in reverse rank order",
    plan=lambda run: stop_steps(run, "Stop first: "),
    run=run_stop,
)
CHECKS_ONLY = Step("preflight checks", plan=preflight_steps, run=_preflight_report)
PREFLIGHT = Step(
    "preflight checks; a failure stops here unless an admin forced the start",
    plan=preflight_steps,
    run=_preflight_gate,
)
START_RANKS = Step(
    "start in rank order, health, smoke test, warm-up",
    plan=start_steps,
    run=run_start,
    undo=rollback,  # stop, in reverse, every engine this run started
)
RECORD_LINK_MODES = Step(
    "record the nodes' new link modes (failover)",
    run=lambda run, rows: after_start(run),
)
BASELINE_LINKS = Step(
    "baseline the node's HCCS rate under traffic before the change (failover)",
    when=lambda run: bool(_verify_node(run)),
    plan=lambda run: run.add_step(
        f"Baseline the HCCS rate of {_verify_node(run)} under traffic"
    ),
    run=lambda run, row: link_baseline(run, row, _verify_node(run)),
)
VERIFY_LINK_SWITCH = Step(
    "verify the link switch on the counters (switched / not switched / cannot verify)",
    when=lambda run: bool(_verify_node(run)),
    plan=lambda run: run.add_step(
        f"Verify the switch on {_verify_node(run)}: its HCCS rate against its baseline"
    ),
    run=lambda run, row: verify_link_switch(run, row, _verify_node(run)),
)


def _correctness_gate(run: Run, row: Any) -> None:
    run.begin(row)
    gate = acceptance_gate(run.cluster, trigger=run.op.kind)
    if gate.blocks_serving:  # policy enforce: the cluster never reaches Running
        raise run.fail(
            row, f"correctness gate failed: {gate.reason}", lines=gate.lines()
        )
    run.finish(
        row,
        gate.reason,
        state=StepState.SUCCEEDED if gate.passed else StepState.WARNING,
    )


CORRECTNESS_GATE = Step(
    "correctness gate: checkable prompts, sane answers (policy enforce / warn / off)",
    plan=lambda run: run.add_step("Correctness gate"),
    run=_correctness_gate,
)
MARK_RUNNING = Step(
    "the cluster is Running",
    run=lambda run, rows: cluster_set_state(run.cluster, ClusterState.RUNNING),
)
CHOOSE_SPARE = Step("choose an idle spare of the same hardware", plan=replace_prepare)
SPARE_PREFLIGHT = Step(
    "preflight on the spare",
    plan=lambda run: run.add_step(
        f"Preflight on the spare {run.replace['spare'].name}",  # type: ignore[index]
        run.replace["spare"],  # type: ignore[index]
    ),
    run=_spare_preflight,
)
RECORD_FAILED_LINKS = Step(
    "record which HCCS links of the node lose packets, under traffic, before it stops",
    when=lambda run: bool(run.op.params.get("record_links")),
    plan=lambda run: run.add_step(
        f"Record the failing HCCS links of {run.replace['old'].name}",  # type: ignore[index]
        run.replace["old"],  # type: ignore[index]
    ),
    run=record_failed_links,
)
SWAP_SPARE_IN = Step(
    "the spare takes the node's rank; the node leaves, out of service",
    plan=_swap_rows,
    run=replace_swap,
    undo=replace_undo,  # the inventory as it was
)

VERIFY_WEIGHTS = Step(
    "sha256 of every model file on every node at once, then compared across nodes",
    plan=weights_rows,
    run=run_weights,
)

BENCHMARK = Step(
    "vllm bench serve on the head, one sweep point after another, then the targets",
    plan=bench_rows,
    run=run_bench,
)

# -- the runbooks ---------------------------------------------------------------------

_START_AND_SERVE = (
    START_RANKS,
    RECORD_LINK_MODES,
    VERIFY_LINK_SWITCH,
    CORRECTNESS_GATE,
    MARK_RUNNING,
)

RUNBOOKS: dict[str, tuple[Step, ...]] = {
    OperationKind.PREFLIGHT: (CHECKS_ONLY,),
    OperationKind.VERIFY_WEIGHTS: (VERIFY_WEIGHTS,),
    OperationKind.BENCHMARK: (BENCHMARK,),
    OperationKind.START: (CLEAR_LEFTOVERS, PREFLIGHT, *_START_AND_SERVE),
    OperationKind.STOP: (STOP,),
    OperationKind.RESTART: (STOP_FIRST, PREFLIGHT, *_START_AND_SERVE),
    # a restart with params["link_modes"] switched (HCCS → RoCE) and params["verify_node"]
    # (every rank gets the same pair: engine.plans.link_pair_errors refuses mixed ones)
    OperationKind.FAILOVER: (BASELINE_LINKS, STOP_FIRST, PREFLIGHT, *_START_AND_SERVE),
    OperationKind.REPLACE: (
        CHOOSE_SPARE,
        SPARE_PREFLIGHT,
        RECORD_FAILED_LINKS,
        STOP_FIRST,
        SWAP_SPARE_IN,
        PREFLIGHT,
        *_START_AND_SERVE,
    ),
    # No scale_out row: remediation scales out with a ``start`` of the standby cluster
    # (params["scale_out_of"]); a scale_out operation fails as not implemented.
}
