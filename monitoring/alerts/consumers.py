"""``/ws/alerts/``: every alert transition (alerts page and the banner on every page), for any viewer."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.permissions import has_role
from monitoring.alerts.services import ALERTS_GROUP
from monitoring.consumers import CLOSE_FORBIDDEN


class AlertsConsumer(AsyncJsonWebsocketConsumer):
    """Joins the ``alerts`` group; ``alert.update`` events go to the browser unchanged."""

    joined = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if (
            user is None
            or not user.is_authenticated
            or not await database_sync_to_async(has_role)(user, "viewer")
        ):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.channel_layer.group_add(ALERTS_GROUP, self.channel_name)
        self.joined = True
        await self.accept()
        await self.send_json({"type": "hello"})

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(ALERTS_GROUP, self.channel_name)

    async def alert_update(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
