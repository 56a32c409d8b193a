"""``/ws/alerts/``: every alert transition (alerts page and the banner on every page), for any viewer."""

from __future__ import annotations

from typing import Any

from console.consumers import AuthorizedConsumer
from monitoring.alerts.publishing import ALERTS_GROUP


class AlertsConsumer(AuthorizedConsumer):
    """Joins the ``alerts`` group; ``alert.update`` events go to the browser unchanged."""

    joined_alerts = False

    async def joined(self) -> None:
        await self.channel_layer.group_add(ALERTS_GROUP, self.channel_name)
        self.joined_alerts = True
        await self.accept()
        await self.send_json({"type": "hello"})

    async def left(self, code: int) -> None:
        if self.joined_alerts:
            await self.channel_layer.group_discard(ALERTS_GROUP, self.channel_name)

    async def alert_update(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
