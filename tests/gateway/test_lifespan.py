"""The web process's ASGI lifespan: at shutdown the gateway writes the usage it holds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from console.asgi import application
from console.gateway import changes
from console.gateway.services import apikey_create
from console.gateway.usage import PENDING_KEY, field_prefix
from console.models import ApiUsage

pytestmark = pytest.mark.django_db(transaction=True)


async def _lifespan() -> list[str]:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[str] = []
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        inbox.put_nowait({"type": kind})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await application({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
    return sent


def test_shutdown_writes_the_usage_still_pending(admin: Any) -> None:
    key, _ = apikey_create(name="late", user=admin)
    # what requests finishing just before the shutdown left in Redis (usage.py's fields)
    prefix = field_prefix(key.pk, "qwen3.5")
    changes._client().hset(
        PENDING_KEY, mapping={prefix + "r": 2, prefix + "p": 30, prefix + "c": 90}
    )
    assert not ApiUsage.objects.exists()
    sent = asyncio.run(_lifespan())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    usage = ApiUsage.objects.get(key=key)
    assert (usage.requests, usage.prompt_tokens, usage.completion_tokens) == (2, 30, 90)
    assert not changes._client().exists(PENDING_KEY)
