"""The one way producers (tasks, services) push live events to browsers."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def publish(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send ``{"type": event_type, **payload}`` to a Channels group; payload must be JSON-safe.

    Call it after the transaction commits (``transaction.on_commit``) so browsers never
    see state the database then rolls back.
    """
    message = {"type": event_type, **json.loads(json.dumps(payload, default=str))}
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(group, message)


def publish_many(events: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Send several ``(group, type, payload)`` events in one event-loop hop (one per ingest round).

    Same contract as ``publish``; batching matters when a round touches hundreds of
    clusters, where one ``async_to_sync`` per group costs more than the sends.
    """
    layer = get_channel_layer()
    if layer is None or not events:
        return
    messages = [
        (group, {"type": event_type, **json.loads(json.dumps(payload, default=str))})
        for group, event_type, payload in events
    ]

    async def send_all() -> None:
        # In order, not gathered: the layer's connection pool is small, and order per group matters.
        for group, message in messages:
            await layer.group_send(group, message)

    async_to_sync(send_all)()
