"""``/ws/playground/``: operators send prompts, answers stream token by token.

Stop aborts the request upstream.

Browser → server: ``{"type": "watch", "cluster": id}`` (join that cluster's live
group and get its state now), ``{"type": "send", "id": n, "cluster": id, "system",
"messages", "temperature", "top_p", "max_tokens", "stop"}``, ``{"type": "stop"}``.
Server → browser: ``state``, ``token`` (text, and ttft_ms with the first one), ``done``
(usage and timings), ``stopped`` (timings so far), ``error`` (message, field).
The state is re-checked on every send, and ``cluster.state`` pushes of the watched
cluster are forwarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from console.constants import ROLE_OPERATOR
from console.consumers import AuthorizedConsumer
from console.engine_auth import engine_headers
from console.models import Cluster
from console.playground.services import (
    PlaygroundRefused,
    Target,
    chat_request,
    cluster_notice,
    cluster_pk,
    playground_target,
)
from console.playground.upstream import UpstreamError, chat_events
from console.services.operations import cluster_group

log = logging.getLogger("console.playground")


class Answer:
    """Timings of one streamed answer: TTFT, mean inter-token latency, tokens/s."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first: float | None = None
        self.last: float | None = None
        self.chunks = 0
        self.usage: dict[str, int] = {}
        self.finish_reason: str | None = None

    def token(self) -> float | None:
        """Record a content chunk; the TTFT in ms when it is the first one."""
        now = time.monotonic()
        self.chunks += 1
        self.last = now
        if self.first is None:
            self.first = now
            return (now - self.started) * 1000
        return None

    def summary(self) -> dict[str, Any]:
        tokens = self.usage.get("completion_tokens") or self.chunks
        out: dict[str, Any] = {
            "prompt_tokens": self.usage.get("prompt_tokens"),
            "completion_tokens": self.usage.get("completion_tokens"),
            "ttft_ms": None,
            "itl_ms": None,
            "tokens_per_s": None,
            "finish_reason": self.finish_reason,
        }
        if self.first is not None and self.last is not None:
            out["ttft_ms"] = round((self.first - self.started) * 1000, 1)
            decode = self.last - self.first
            if tokens > 1 and decode > 0:
                out["itl_ms"] = round(decode * 1000 / (tokens - 1), 2)
                out["tokens_per_s"] = round((tokens - 1) / decode, 1)
        return out


class PlaygroundConsumer(AuthorizedConsumer):
    """One socket per playground page; at most one answer streams at a time.

    Operators only: the role is re-checked before every message (AuthorizedConsumer),
    and a demotion, deactivation or logout closes the socket, ending its stream.
    """

    required_role = ROLE_OPERATOR
    group: str | None = None
    task: asyncio.Task[None] | None = None
    answer: Answer | None = None
    cluster_id: int | None = None
    lang: str = ""

    async def joined(self) -> None:
        # Messages in the page's language (the language switch sets this cookie).
        chosen = self.scope.get("cookies", {}).get(settings.LANGUAGE_COOKIE_NAME, "")
        valid = chosen and translation.check_for_language(chosen)
        self.lang = (
            chosen if valid else (translation.get_language() or settings.LANGUAGE_CODE)
        )
        await self.accept()

    async def left(self, code: int) -> None:
        await self._cancel()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        with translation.override(self.lang):
            await self._receive(content)

    async def _receive(self, content: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "watch":
            await self._watch(content.get("cluster"))
        elif kind == "send":
            await self._send_prompt(content)
        elif kind == "stop":
            if await self._cancel():
                # Timings of what arrived before Stop (usage: the engine sends none).
                summary = self.answer.summary() if self.answer else {}
                await self.send_json(
                    {
                        **summary,
                        "type": "stopped",
                        "id": content.get("id"),
                        "stopped": True,
                    }
                )
        else:
            await self.send_json(
                {
                    "type": "error",
                    "field": "type",
                    "message": _("type: send one of watch, send, stop."),
                }
            )

    async def _watch(self, raw: Any) -> None:
        cluster_id = cluster_pk(raw)
        state = None if cluster_id is None else await self._state(cluster_id)
        if cluster_id is None or state is None:
            await self.send_json(
                {
                    "type": "error",
                    "field": "cluster",
                    "message": _("cluster: pick a cluster from the list."),
                }
            )
            return
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.cluster_id = cluster_id
        self.group = cluster_group(self.cluster_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_json({"type": "state", "cluster": cluster_id, **state})

    @database_sync_to_async
    def _state(self, cluster_id: int) -> dict[str, Any] | None:

        cluster = Cluster.objects.filter(pk=cluster_id).first()
        if cluster is None:
            return None
        return {
            "state": cluster.state,
            "label": str(cluster.get_state_display()),
            "notice": cluster_notice(cluster),
        }

    async def cluster_state(self, event: dict[str, Any]) -> None:
        """The watched cluster changed state: re-check it and tell the page."""
        await self._push_state()

    async def alert_update(self, event: dict[str, Any]) -> None:
        """An alert of the watched cluster changed: a critical one may degrade it."""
        await self._push_state()

    # The watched cluster's group also carries these; the playground has no use for them,
    # but a message without a handler makes Channels raise and drop the socket (each
    # collection round, mid-answer). Issue 21 point 1; tests/e2e/soak_live_pages.py.
    async def telemetry_update(self, event: dict[str, Any]) -> None:
        return None

    async def operation_progress(self, event: dict[str, Any]) -> None:
        return None

    async def _push_state(self) -> None:
        if self.cluster_id is None:
            return
        with translation.override(self.lang):
            state = await self._state(self.cluster_id)
        if state is not None:
            await self.send_json({"type": "state", "cluster": self.cluster_id, **state})

    async def _send_prompt(self, content: dict[str, Any]) -> None:
        answer_id = content.get("id")
        if self.task is not None and not self.task.done():
            await self.send_json(
                {
                    "type": "error",
                    "id": answer_id,
                    "field": None,
                    "message": _("An answer is still streaming; press Stop first."),
                }
            )
            return
        try:
            target, body = await self._prepare(content)
        except PlaygroundRefused as exc:
            await self.send_json(
                {
                    "type": "error",
                    "id": answer_id,
                    "field": exc.field,
                    "message": exc.message,
                }
            )
            return
        user = self.scope["user"]
        log.info(
            "playground: %s sent a prompt to cluster %s (%s, %d turns)",
            user.get_username(),
            target.cluster_name,
            target.model,
            len(body["messages"]),
        )
        await self.send_json(
            {
                "type": "start",
                "id": answer_id,
                "cluster": target.cluster_id,
                "model": target.model,
            }
        )
        self.task = asyncio.create_task(self._stream(answer_id, target, body))

    @database_sync_to_async
    def _prepare(self, content: dict[str, Any]) -> tuple[Target, dict[str, Any]]:
        target = playground_target(cluster_id=content.get("cluster"))
        return target, chat_request(model=target.model, data=content)

    async def _stream(
        self, answer_id: Any, target: Target, body: dict[str, Any]
    ) -> None:
        answer = self.answer = Answer()
        try:
            async for chunk in chat_events(
                base_url=target.base_url,
                body=body,
                headers=engine_headers(target.cluster_name),
            ):
                if chunk.get("usage"):
                    answer.usage = {
                        k: int(v)
                        for k, v in chunk["usage"].items()
                        if isinstance(v, int)
                    }
                for choice in chunk.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        ttft = answer.token()
                        msg: dict[str, Any] = {
                            "type": "token",
                            "id": answer_id,
                            "text": text,
                        }
                        if ttft is not None:
                            msg["ttft_ms"] = round(ttft, 1)
                        await self.send_json(msg)
                    if choice.get("finish_reason"):
                        answer.finish_reason = choice["finish_reason"]
        except UpstreamError as exc:
            await self.send_json(
                {"type": "error", "id": answer_id, "field": None, "message": str(exc)}
            )
            return
        except Exception:  # the page must not wait forever on a bug
            log.exception(
                "playground: answer %s from %s failed", answer_id, target.cluster_name
            )
            message = _("The answer failed; the console log has the details.")
            await self.send_json(
                {"type": "error", "id": answer_id, "field": None, "message": message}
            )
            return
        await self.send_json({"type": "done", "id": answer_id, **answer.summary()})

    async def _cancel(self) -> bool:
        """Cancel the streaming answer; True if one was running.

        Closing its HTTP stream makes the engine abort the request.
        """
        task, self.task = self.task, None
        if task is None or task.done():
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return True
