"""WebSocket authorization for every consumer, and the operation consumer (``/ws/operations/<id>/``).

:class:`AuthorizedConsumer` is the one place sockets are authorized. It checks the
user (active, role at least ``required_role``, session not ended) when the socket
opens and again before every message it receives; it joins the socket to the user's
group and its session's group, so that a role change, a deactivation (console.signals)
or a logout closes every socket of that user or session at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils.translation import gettext as _

from console.constants import ROLE_VIEWER
from console.models import Operation
from console.permissions import has_role
from console.services.operations import operation_group

log = logging.getLogger("console.consumers")

CLOSE_FORBIDDEN = 4403  # not logged in, or the role does not allow this socket
CLOSE_NOT_FOUND = 4404  # the cluster/operation of the URL does not exist
CLOSE_REVOKED = 4401  # logged out, deactivated or demoted while the socket was open
# a browser message is a small JSON object; anything larger is refused unread
MAX_MESSAGE_CHARS = 256 * 1024


def user_group(user_id: int) -> str:
    """Every socket of one user (closed on a role change or deactivation)."""
    return f"user-{int(user_id)}"


def session_group(session_key: str) -> str:
    """Every socket of one login session (closed on logout); the key itself is not exposed."""
    return "session-" + hashlib.sha256(session_key.encode()).hexdigest()[:32]


class AuthorizedConsumer(AsyncJsonWebsocketConsumer):
    """Base of every console socket: authorization, the close codes, safe JSON decoding.

    Subclasses set ``required_role`` and override :meth:`joined` (join groups, check
    the URL's object, then ``accept``), :meth:`left` and, if the page sends anything,
    ``receive_json``.
    """

    required_role: str = ROLE_VIEWER
    auth_groups: tuple[str, ...] = ()

    # -- authorization ------------------------------------------------------------

    def _session_key(self) -> str | None:
        session = self.scope.get("session")
        return getattr(session, "session_key", None) if session is not None else None

    @database_sync_to_async
    def authorized(self) -> bool:
        """The scope's user, read fresh from the database: active, with the role, still logged in."""
        from django.contrib.auth import get_user_model

        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return False
        fresh = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
        if fresh is None or not has_role(fresh, self.required_role):
            return False
        session = self.scope.get("session")
        key = self._session_key()
        return not (key and session is not None and not session.exists(key))

    # -- lifecycle ------------------------------------------------------------------

    async def connect(self) -> None:
        if not await self.authorized():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        groups = [user_group(self.scope["user"].pk)]
        key = self._session_key()
        if key:
            groups.append(session_group(key))
        self.auth_groups = tuple(groups)
        for group in self.auth_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.joined()

    async def joined(self) -> None:
        """Authorized: join the socket's own groups and accept (or close with a code)."""
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.auth_groups:
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.left(code)

    async def left(self, code: int) -> None:
        """The socket closed: leave the socket's own groups, cancel its work."""

    async def receive(
        self,
        text_data: str | None = None,
        bytes_data: bytes | None = None,
        **kwargs: Any,
    ) -> None:
        """Re-authorize, then decode: a message the user may no longer send closes the
        socket; one that is not a JSON text frame gets an error, never a crash."""
        if not await self.authorized():
            await self.close(code=CLOSE_REVOKED)
            return
        if text_data is None or len(text_data) > MAX_MESSAGE_CHARS:
            await self.refuse(_("message: send one JSON object as a text frame."))
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):
            await self.refuse(_("message: send one JSON object as a text frame."))
            return
        await self.receive_json(content, **kwargs)

    async def refuse(self, message: str, field: str | None = "message") -> None:
        await self.send_json({"type": "error", "field": field, "message": message})

    # -- events from console.signals ------------------------------------------------

    async def auth_recheck(self, event: dict[str, Any]) -> None:
        """The user's role or active flag changed: close the socket unless still allowed."""
        if not await self.authorized():
            await self.close(code=CLOSE_REVOKED)

    async def auth_logout(self, event: dict[str, Any]) -> None:
        """The socket's session logged out."""
        await self.close(code=CLOSE_REVOKED)


class OperationConsumer(AuthorizedConsumer):
    """Pushes ``operation.progress`` events of one operation to any logged-in viewer."""

    group: str | None = None

    async def joined(self) -> None:
        operation_id = int(self.scope["url_route"]["kwargs"]["operation_id"])
        if not await self._exists(operation_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = operation_group(operation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def left(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    @database_sync_to_async
    def _exists(self, operation_id: int) -> bool:

        return Operation.objects.filter(pk=operation_id).exists()

    async def operation_progress(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
