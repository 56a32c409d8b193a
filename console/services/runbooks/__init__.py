"""The runbooks: what preflight, start, stop and restart do, step by step.

Run by the control worker (console.tasks.operation_run_task). Every step is a row
the operator watches live; a failed start stops what it started, in reverse rank
order, and leaves the cluster Stopped — never half up.

Split by sub-domain, each part a class that builds on the one before:
base (steps, agent calls, plan) → preflight → lifecycle (start, stop, rollback)
→ remedies (failover verification, node replacement) → runner (``Runbook.run``).
"""

from console.services.runbooks.base import Cancelled, StepFailed
from console.services.runbooks.runner import Runbook, run_operation

__all__ = ["Cancelled", "Runbook", "StepFailed", "run_operation"]
