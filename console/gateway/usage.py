"""Usage counters per key and model, batched in process and flushed to the database
every few seconds.

A request adds to an in-memory tally; the first request to finish after
``GATEWAY_USAGE_FLUSH_S`` writes every pending tally with one UPDATE (or INSERT) per
key x model, so a stream costs no database writes per chunk and a busy key one write
per interval, not per request.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from console.models import ApiKey, ApiUsage

_lock = threading.Lock()
_pending: defaultdict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
_last_flush = time.monotonic()


def usage_add(
    *, key_id: int, model: str, prompt_tokens: int, completion_tokens: int
) -> None:
    """Count one finished request in memory."""
    with _lock:
        row = _pending[(key_id, model)]
        row[0] += 1
        row[1] += prompt_tokens
        row[2] += completion_tokens


def usage_flush() -> int:
    """Write every pending tally to ApiUsage; return the number of key x model rows
    written."""
    global _last_flush
    with _lock:
        batch = dict(_pending)
        _pending.clear()
        _last_flush = time.monotonic()
    for (key_id, model), (requests, prompt, completion) in batch.items():
        values = {
            "requests": F("requests") + requests,
            "prompt_tokens": F("prompt_tokens") + prompt,
            "completion_tokens": F("completion_tokens") + completion,
            "updated_at": timezone.now(),
        }
        if not ApiUsage.objects.filter(key_id=key_id, model=model).update(**values):
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
    if batch:
        ApiKey.objects.filter(pk__in={k for k, _ in batch}).update(
            last_used_at=timezone.now()
        )
    return len(batch)


async def usage_maybe_flush() -> None:
    """Flush when the interval has passed (called as each request finishes)."""
    if time.monotonic() - _last_flush >= settings.GATEWAY_USAGE_FLUSH_S:
        await sync_to_async(usage_flush, thread_sensitive=True)()
