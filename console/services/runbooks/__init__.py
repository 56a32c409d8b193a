"""The runbooks: what each operation kind does, step by step, with its rollbacks.

Run by the control worker (console.tasks.operation_run_task). Every step is a row
the operator watches live; a failed start stops what it started, in reverse rank
order, and leaves the cluster Stopped — never half up.

Read ``table.py`` first: one table of steps per operation kind. The steps' work lives
by sub-domain in ``preflight``, ``lifecycle`` (start, stop, rollback) and ``remedies``
(failover verification, node replacement), each a set of functions over the small run
context of ``base.Run``; ``runner`` walks a table.
"""

from console.services.runbooks.base import Cancelled, Run, StepFailed
from console.services.runbooks.runner import execute, run_operation
from console.services.runbooks.table import RUNBOOKS, Step

__all__ = [
    "RUNBOOKS",
    "Cancelled",
    "Run",
    "Step",
    "StepFailed",
    "execute",
    "run_operation",
]
