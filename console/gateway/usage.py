"""Usage counters per key and model: counted in Redis as each request finishes (in the
same round trip as its tokens against the rate limit), written to the database in
batches.

A flush renames the pending hash away (atomically: a request finishing meanwhile
starts a new one), adds its counts to ApiUsage in one transaction, then deletes it.
Every worker process flushes every ``GATEWAY_USAGE_FLUSH_S`` seconds (0: after every
request); counts from all processes add up, none is lost when a process restarts.
A flush whose database write fails leaves its hash in Redis and the next flush of
any process writes it, so the counts stay exact unless a process dies between the
database commit and the delete (the batch would then be counted twice).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from console.gateway import changes
from console.gateway.snapshot import on_db_thread
from console.models import ApiKey, ApiUsage

log = logging.getLogger(__name__)

PENDING_KEY = "gw:usage:pending"
FLUSHING_PREFIX = "gw:usage:flushing:"
_flush_lock = threading.Lock()


def field_prefix(key_id: int, model: str) -> str:
    """A hash field is ``<key pk>|<model>|r`` (requests), ``|p`` (prompt tokens) or
    ``|c`` (completion tokens)."""
    return f"{key_id}|{model}|"


def _client() -> redis.Redis:
    return changes._client()


def _parse(raw: dict[Any, Any]) -> dict[tuple[int, str], list[int]]:
    rows: defaultdict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for name, value in raw.items():
        text = name.decode()
        key_id, rest = text.split("|", 1)
        model, kind = rest.rsplit("|", 1)
        rows[(int(key_id), model)]["rpc".index(kind)] += int(value)
    return rows


def usage_flush() -> int:
    """Write every pending count to ApiUsage (sync); return the key x model rows
    written."""
    client = _client()
    with _flush_lock:
        batches = []
        mine = f"{FLUSHING_PREFIX}{int(time.time())}:{uuid.uuid4().hex}"
        try:
            client.rename(PENDING_KEY, mine)
            batches.append(mine)
        except redis.ResponseError:  # no such key: nothing pending
            pass
        # A batch left by a flush that failed (database down) or died a minute ago:
        # claim it (the rename succeeds for one process only) and write it.
        for orphan in client.scan_iter(f"{FLUSHING_PREFIX}*", count=100):
            name = orphan.decode()
            stamp = name[len(FLUSHING_PREFIX) :].split(":", 1)[0]
            if name == mine or not stamp.isdigit() or int(stamp) > time.time() - 60:
                continue
            claimed = f"{FLUSHING_PREFIX}{int(time.time())}:{uuid.uuid4().hex}"
            try:
                if client.renamenx(name, claimed):
                    batches.append(claimed)
            except redis.ResponseError:  # another process claimed it first
                continue
        written = 0
        for batch in batches:
            rows = _parse(client.hgetall(batch))
            _write(rows)
            client.delete(batch)
            written += len(rows)
        return written


def _write(rows: dict[tuple[int, str], list[int]]) -> None:
    if not rows:
        return
    now = timezone.now()
    with transaction.atomic(), changes.quiet():
        for (key_id, model), (requests, prompt, completion) in rows.items():
            values = {
                "requests": F("requests") + requests,
                "prompt_tokens": F("prompt_tokens") + prompt,
                "completion_tokens": F("completion_tokens") + completion,
                "updated_at": now,
            }
            if ApiUsage.objects.filter(key_id=key_id, model=model).update(**values):
                continue
            if not ApiKey.objects.filter(pk=key_id).exists():
                continue  # the key was deleted since: its usage goes with it
            try:
                with transaction.atomic():
                    ApiUsage.objects.create(
                        key_id=key_id,
                        model=model,
                        requests=requests,
                        prompt_tokens=prompt,
                        completion_tokens=completion,
                    )
            except IntegrityError:  # another process inserted the row first
                ApiUsage.objects.filter(key_id=key_id, model=model).update(**values)
        ApiKey.objects.filter(pk__in={k for k, _ in rows}).update(last_used_at=now)


_flushing: set[asyncio.Task[None]] = set()


def usage_flush_soon() -> None:
    """Flush on the gateway's database thread without holding up the response."""
    task = asyncio.get_running_loop().create_task(_flush_async())
    _flushing.add(task)
    task.add_done_callback(_flushing.discard)


async def _flush_async(when: str = "") -> None:
    """One flush on the database thread. Redis or the database out of reach is an
    outage the operator already hears of (alerts, /healthz): one warning line per
    attempt, not a traceback every few seconds; anything else is a bug and logged
    whole."""
    try:
        await on_db_thread(usage_flush)
    except (redis.RedisError, DatabaseError) as exc:
        log.warning(
            "gateway usage flush%s failed (%s: %s); the counts stay in Redis for the "
            "next flush",
            when,
            type(exc).__name__,
            exc,
        )
    except Exception:  # the counts stay in Redis for the next flush
        log.exception("gateway usage flush%s failed", when)


async def flush_now() -> None:
    """Write what Redis holds now (the process is stopping); a failure is logged."""
    await _flush_async(" at shutdown")


async def run() -> None:
    """Flush every GATEWAY_USAGE_FLUSH_S for as long as the event loop runs."""
    interval = settings.GATEWAY_USAGE_FLUSH_S
    if not interval:
        return
    while True:
        await asyncio.sleep(interval)
        await _flush_async()
