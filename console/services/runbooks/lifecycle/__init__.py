"""Start (rank order, head first), stop (reverse order, drained) and rollback.

``start`` starts the ranks and waits for them (listening, joined, healthy), ``smoke``
sends the first requests (one completion, then the warm-up), ``stop`` drains and stops
the ranks, rolls back what a failed run started and leaves the cluster Stopped. The
runbook tables (``table.py``) and the runner import these names from here.
"""

from console.services.runbooks.lifecycle.smoke import smoke_test, warm_up
from console.services.runbooks.lifecycle.start import (
    after_start,
    confirm_running,
    run_cleanup,
    run_start,
    start_steps,
    wait_healthy,
    wait_listening,
)
from console.services.runbooks.lifecycle.stop import (
    in_flight,
    leave_stopped,
    rollback,
    run_stop,
    skip_pending,
    stop_steps,
)

__all__ = [
    "after_start",
    "confirm_running",
    "in_flight",
    "leave_stopped",
    "rollback",
    "run_cleanup",
    "run_start",
    "run_stop",
    "skip_pending",
    "smoke_test",
    "start_steps",
    "stop_steps",
    "wait_healthy",
    "wait_listening",
    "warm_up",
]
