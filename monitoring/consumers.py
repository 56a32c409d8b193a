"""WebSocket consumers: one socket per page, joined to a group; handlers only forward."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from console.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, AuthorizedConsumer
from console.models import Cluster

__all__ = ["CLOSE_FORBIDDEN", "ClusterConsumer", "cluster_group"]


def cluster_group(cluster_id: int) -> str:
    return f"cluster-{cluster_id}"


class ClusterConsumer(AuthorizedConsumer):
    """Live events of one cluster (``/ws/clusters/<id>/``) for any logged-in viewer."""

    group: str | None = None

    async def joined(self) -> None:
        cluster_id = int(self.scope["url_route"]["kwargs"]["cluster_id"])
        if not await self._cluster_exists(cluster_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = cluster_group(cluster_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "cluster": cluster_id})

    async def left(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    @database_sync_to_async
    def _cluster_exists(self, cluster_id: int) -> bool:

        return Cluster.objects.filter(pk=cluster_id).exists()

    # Event handlers: "<a>.<b>" events arrive at "<a>_<b>" and go to the browser unchanged.
    async def telemetry_update(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def cluster_state(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def operation_progress(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def alert_update(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
