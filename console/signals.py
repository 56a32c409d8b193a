"""What console announces; other apps listen (monitoring connects in MonitoringConfig.ready).

Console never imports the apps that react to it: dependencies run monitoring → console
→ engine (README "Architecture"). A signal here is sent once, after the transaction
that caused it commits, so a receiver never sees state the database then rolls back.

It also closes a user's open sockets when their access changes (see console.consumers).

A role change (group membership, superuser flag), a deactivation or a deletion sends
``auth.recheck`` to the user's group: each socket re-reads the user and closes unless
still allowed. A logout sends ``auth.logout`` to that session's group. Sent after the
commit, so the sockets read the new state; a channel layer that is down is logged,
never an error for the change itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
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

# A correctness gate finished: kwargs ``gate_run`` (console.models.GateRun).
# Sent by console.services.acceptance.acceptance_gate; monitoring.alerts.gate raises
# or resolves the "Correctness gate failed" alert from it.
gate_finished = Signal()


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


# -- sockets follow access changes ---------------------------------------------------
sockets_log = logging.getLogger("console.consumers")


_offline = threading.local()


@contextmanager
def sockets_offline() -> Iterator[None]:
    """Within this block no socket is told of access changes: nothing can hold one
    (``make run`` seeds its users before the channel layer's Redis or any web process
    starts)."""
    _offline.depth = getattr(_offline, "depth", 0) + 1
    try:
        yield
    finally:
        _offline.depth -= 1


def _send(group: str, event_type: str) -> None:
    if getattr(_offline, "depth", 0):
        return

    def send() -> None:
        try:
            layer = get_channel_layer()
            if layer is not None:
                async_to_sync(layer.group_send)(group, {"type": event_type})
        except (ConnectionError, redis.exceptions.ConnectionError) as exc:
            # the change is committed; the sockets re-check on their next message
            sockets_log.warning(
                "could not tell the sockets of %s to %s: %s", group, event_type, exc
            )
        except Exception:  # noqa: BLE001 -- same, but unexpected: keep the traceback
            sockets_log.exception(
                "could not tell the sockets of %s to %s", group, event_type
            )

    transaction.on_commit(send)


def recheck_users(user_ids: Any) -> None:
    # Late: console.consumers imports console.services.operations, which imports this module.
    from console.consumers import user_group

    for pk in user_ids:
        _send(user_group(pk), "auth.recheck")


def _user_saved(
    sender: Any,
    instance: Any,
    created: bool = False,
    update_fields: Any = None,
    **kwargs: Any,
) -> None:
    # every login saves last_login alone: nothing about access changed
    if not created and set(update_fields or ()) != {"last_login"}:
        recheck_users([instance.pk])


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    recheck_users([instance.pk])


def _groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any
) -> None:
    if action not in ("post_add", "post_remove", "post_clear", "pre_clear"):
        return
    if not reverse:  # user.groups.add(...): the instance is the user
        recheck_users([instance.pk])
    elif action == "pre_clear":  # group.user_set.clear(): who was in it
        recheck_users(list(instance.user_set.values_list("pk", flat=True)))
    elif pk_set:  # group.user_set.add/remove(users)
        recheck_users(pk_set)


def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # Late: console.consumers imports console.services.operations, which imports this module.
    from console.consumers import session_group

    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        _send(session_group(key), "auth.logout")


def connect_signals() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.signals import user_logged_out
    from django.db.models.signals import m2m_changed, post_delete, post_save

    user_model = get_user_model()
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="console.auth.saved")
    post_delete.connect(
        _user_deleted, sender=user_model, dispatch_uid="console.auth.deleted"
    )
    m2m_changed.connect(
        _groups_changed,
        sender=user_model.groups.through,
        dispatch_uid="console.auth.groups",
    )
    user_logged_out.connect(_logged_out, dispatch_uid="console.auth.logout")
