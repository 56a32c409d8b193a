"""The web process's ASGI lifespan: at shutdown the gateway writes the usage it holds."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from console.asgi import application
from console.gateway import changes
from console.gateway.services import apikey_create
from console.gateway.usage import PENDING_KEY, field_prefix
from console.models import ApiUsage
from tests.factories import free_port
from tests.fresh import fresh_python

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


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    """The startup freezes the collector's objects (gc.freeze); this test process's
    go back to being collected afterwards."""
    yield
    gc.unfreeze()


def test_startup_moves_what_the_process_loaded_out_of_the_collectors_way() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    sent = asyncio.run(_lifespan())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    # the modules, Django's and the console's objects: no longer walked by a full
    # collection
    assert gc.get_freeze_count() > 10_000


FRESH_PROCESS = """
import asyncio, gc, sys
from django.urls import resolve
from console.asgi import application

async def startup():  # the startup half only: the shutdown would write usage
    inbox = asyncio.Queue()
    inbox.put_nowait({"type": "lifespan.startup"})
    done = asyncio.Event()
    async def send(message):
        done.set()
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
    task = asyncio.ensure_future(application(scope, inbox.get, send))
    await done.wait()
    task.cancel()

assert "console.api.views" not in sys.modules  # not loaded by the import itself
asyncio.run(startup())
view = resolve("/api/clusters/").func  # what the first API request runs
print(any(o is view for o in gc.get_objects()))  # frozen: not among these
"""


def test_the_views_are_loaded_before_the_freeze_not_at_the_first_page() -> None:
    # In a fresh process, as uvicorn starts one: Django would import the URLconf at
    # the first page request, after the freeze, and every full collection would
    # walk its objects again.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings"}
    out = fresh_python("-c", FRESH_PROCESS, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


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


def test_shutdown_with_redis_gone_logs_one_warning_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Redis stopped before the web process: the shutdown still completes, and says so
    # in one line (no traceback) that names what failed and where the counts are
    gone = redis.Redis(port=free_port(), socket_connect_timeout=1)
    monkeypatch.setattr(changes, "_sync_client", gone)
    with caplog.at_level(logging.WARNING, logger="console.gateway"):
        sent = asyncio.run(_lifespan())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    records = [r for r in caplog.records if r.name.startswith("console.gateway")]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert records[0].exc_info is None
    message = records[0].getMessage()
    assert "flush at shutdown failed (ConnectionError" in message
    assert "stay in Redis" in message
