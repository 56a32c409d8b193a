"""Entry: which steps each kind runs, in what order, and what a failure or cancel undoes."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from console.models import ClusterState
from console.models.operations import (
    Operation,
    OperationKind,
    OperationState,
    StepState,
)
from console.services.evidence import evidence_for_runbook
from console.services.operations import (
    cluster_set_state,
    operation_claim,
    operation_heartbeat,
    operation_terminate,
)
from console.services.runbooks.base import Cancelled, StepFailed
from console.services.runbooks.remedies import RemedyRunbook

log = logging.getLogger(__name__)


class Runbook(RemedyRunbook):
    """Executes one operation of any kind."""

    # -- entry ------------------------------------------------------------------------------

    def run(self) -> None:
        kind = self.op.kind
        if not self.nodes:
            operation_terminate(
                self.op, OperationState.FAILED, error="the cluster has no nodes"
            )
            return
        # issue 19: an incident's remedy first keeps the dead engine's evidence
        evidence_for_runbook(self.op, self.nodes, failed=False)
        try:
            if kind == OperationKind.PREFLIGHT:
                ok = self.run_preflight(self.preflight_steps())
                state = OperationState.SUCCEEDED if ok else OperationState.FAILED
                operation_terminate(
                    self.op,
                    state,
                    error="" if ok else "preflight found problems",
                    result=self.result,
                )
                return
            if kind == OperationKind.STOP:
                self.run_stop(self.stop_steps())
            elif kind in (
                OperationKind.START,
                OperationKind.RESTART,
                OperationKind.FAILOVER,
                OperationKind.REPLACE,
            ):
                cleanup = (
                    self.add_step("Clear leftover engines")
                    if kind == OperationKind.START
                    else None
                )
                replace = (
                    self.replace_prepare() if kind == OperationKind.REPLACE else None
                )
                stop_steps = (
                    self.stop_steps("Stop first: ") if cleanup is None else None
                )
                if replace is not None:
                    replace["swap"] = self.add_step(
                        f"Swap {replace['old'].name} for {replace['spare'].name} in the inventory"
                    )
                    self.nodes = replace["new_nodes"]
                pre = self.preflight_steps()
                start = self.start_steps()
                verify_node = self.op.params.get("verify_node")
                verify = (
                    self.add_step(
                        f"Verify the switch on {verify_node}: HCCS counters still, RoCE counters growing"
                    )
                    if verify_node
                    else None
                )
                if cleanup is not None:
                    self.run_cleanup(cleanup)
                if replace is not None:
                    self.replace_spare_preflight(replace)
                    self.nodes = replace["old_nodes"]
                if stop_steps is not None:
                    self.run_stop(stop_steps)
                if replace is not None:
                    self.replace_swap(replace)
                if not self.run_preflight(pre):
                    if not self.op.force:
                        raise StepFailed(
                            "preflight failed; fix the failing checks (or have an admin force the start)"
                        )
                    self.add_step("Preflight failed but an admin forced the start")
                if self.plan is None:
                    raise StepFailed("no valid launch plan")
                self.run_start(start)
                self.after_start()
                if verify is not None:
                    self.verify_link_switch(verify, str(verify_node))
                cluster_set_state(self.cluster, ClusterState.RUNNING)
            else:
                raise StepFailed(f"{kind} is not implemented by this runbook")
        except Cancelled as exc:
            self.rollback()
            self.replace_undo()
            self.skip_pending()
            self.leave_stopped()
            operation_terminate(
                self.op, OperationState.CANCELLED, error=str(exc), result=self.result
            )
            return
        except Exception as exc:
            if not isinstance(exc, StepFailed):
                log.exception("operation %s crashed", self.op.pk)
                for s in self.steps:
                    if s.state == StepState.RUNNING:
                        self.fail(s, f"internal error: {exc!r}")
            # issue 19: every node's evidence, before the rollback stops engines
            evidence_for_runbook(self.op, self.nodes, failed=True)
            self.rollback()
            self.replace_undo()
            self.skip_pending()
            self.leave_stopped()
            operation_terminate(
                self.op, OperationState.FAILED, error=str(exc), result=self.result
            )
            return
        self.skip_pending()
        operation_terminate(self.op, OperationState.SUCCEEDED, result=self.result)


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
        Runbook(op).run()
    finally:
        stop.set()
        thread.join(timeout=5)
        close_old_connections()
    return Operation.objects.get(pk=operation_id).state
