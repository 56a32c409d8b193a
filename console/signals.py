"""What console announces; other apps listen (monitoring connects in MonitoringConfig.ready).

Console never imports the apps that react to it: dependencies run monitoring → console
→ engine (README "Architecture"). A signal here is sent once, after the transaction
that caused it commits, so a receiver never sees state the database then rolls back.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger(__name__)

# An operation reached a final state (succeeded, failed, cancelled, interrupted).
# Sent by console.services.operations.operation_terminate, the one place an operation
# finishes, with sender=Operation and ``operation_id``.
operation_finished = Signal()

# Questions console asks of whichever app measures the hardware (monitoring answers in
# its receivers); console.selectors wraps each in a function that returns the answer.
# sender=Cluster, ``cluster``: firing, unsilenced critical alerts as [(target, rule name)].
critical_alerts_asked = Signal()
# sender=Node, ``node``: the node's latest sample as (ts, data dict), or None.
latest_sample_asked = Signal()


def ask(signal: Signal, sender: type, **kwargs: object) -> object:
    """The first receiver's non-None answer to ``signal``; None when nobody answers."""
    for _receiver, answer in signal.send(sender=sender, **kwargs):
        if answer is not None:
            return answer
    return None


def send_on_commit(signal: Signal, sender: type, **kwargs: object) -> None:
    """Send ``signal`` after the current transaction commits (at once outside one).

    Receivers' exceptions are logged, not raised: whoever finished the operation has
    nothing to undo because a listener failed.
    """

    def send() -> None:
        for receiver, result in signal.send_robust(sender=sender, **kwargs):
            if isinstance(result, Exception):
                log.error(
                    "%s receiver %r failed for %s",
                    sender.__name__,
                    receiver,
                    kwargs,
                    exc_info=result,
                )

    transaction.on_commit(send)
