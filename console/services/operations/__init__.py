"""Writes around operations: request one, record its lifecycle, reap dead ones.

The runbooks themselves (what each kind does, step by step) live in
console.services.runbooks; this package owns the Operation rows' state machine:
requesting one (start.py), its lifecycle once requested (lifecycle.py) and the
pushes to the live pages (push.py).
"""

from __future__ import annotations

from console.services.operations.lifecycle import (
    operation_cancel,
    operation_claim,
    operation_heartbeat,
    operation_reap_interrupted,
    operation_terminate,
)
from console.services.operations.push import (
    cluster_group,
    cluster_set_state,
    operation_group,
    operation_publish,
)
from console.services.operations.start import (
    OperationConflict,
    OperationRefused,
    operation_start,
)

__all__ = [
    "OperationConflict",
    "OperationRefused",
    "cluster_group",
    "cluster_set_state",
    "operation_cancel",
    "operation_claim",
    "operation_group",
    "operation_heartbeat",
    "operation_publish",
    "operation_reap_interrupted",
    "operation_start",
    "operation_terminate",
]
