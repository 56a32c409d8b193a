"""WebSocket consumers: one socket per page, joined to a group; handlers only forward."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.permissions import has_role

CLOSE_FORBIDDEN = 4403


def cluster_group(cluster_id: int) -> str:
    return f"cluster-{cluster_id}"


class ClusterConsumer(AsyncJsonWebsocketConsumer):
    """Live events of one cluster (``/ws/clusters/<id>/``) for any logged-in viewer."""

    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if (
            user is None
            or not user.is_authenticated
            or not await database_sync_to_async(has_role)(user, "viewer")
        ):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        cluster_id = int(self.scope["url_route"]["kwargs"]["cluster_id"])
        if not await self._cluster_exists(cluster_id):
            await self.close(code=4404)
            return
        self.group = cluster_group(cluster_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "cluster": cluster_id})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    @database_sync_to_async
    def _cluster_exists(self, cluster_id: int) -> bool:
        from console.models import Cluster

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
