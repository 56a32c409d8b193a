"""WebSocket consumer for one operation's live steps (``/ws/operations/<id>/``)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.permissions import has_role
from console.services.operations import operation_group

CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class OperationConsumer(AsyncJsonWebsocketConsumer):
    """Pushes ``operation.progress`` events of one operation to any logged-in viewer."""

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
        operation_id = int(self.scope["url_route"]["kwargs"]["operation_id"])
        if not await self._exists(operation_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = operation_group(operation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    @database_sync_to_async
    def _exists(self, operation_id: int) -> bool:
        from console.models import Operation

        return Operation.objects.filter(pk=operation_id).exists()

    async def operation_progress(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
