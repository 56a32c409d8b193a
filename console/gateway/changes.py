"""The gateway's cache version: a Redis counter bumped after every committed write to the
tables the gateway caches (keys, clusters, their head nodes and profiles).

Every gateway request reads the counter in the same Redis round trip as its rate
limit; a process whose snapshot is older reloads it before answering. So a revoked
key, a draining cluster or a moved head node takes effect from the next request, in
every worker process, without a database query per request.

The bump hooks the database connection (``execute_wrappers``), not model signals:
``QuerySet.update()`` — how cluster states, node ports and revocations are written —
sends no signal. Any process that writes (web workers, Celery workers, management
commands, tests) bumps, after the transaction commits, so a reload never sees the
old rows under the new version.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

VERSION_KEY = "gw:cache_version"

# table -> the columns whose change matters to the gateway (None: every column)
WATCHED: dict[str, frozenset[str] | None] = {
    "console_apikey": frozenset(
        {"digest", "prefix", "rpm", "tpm", "revoked_at", "name"}
    ),
    "console_cluster": frozenset({"state", "profile_id", "name", "gate_blocked"}),
    "console_node": frozenset(
        {"cluster_id", "role", "rank", "management_ip", "api_port"}
    ),
    "console_engineprofile": None,
}
_TABLE = re.compile(
    r'^\s*(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+[`"]?(\w+)[`"]?', re.IGNORECASE
)
_SET = re.compile(r"\bSET\s+(.*?)(?:\bWHERE\b|$)", re.IGNORECASE | re.DOTALL)
_COLUMN = re.compile(r'[`"]?(\w+)[`"]?\s*=')

_local = threading.local()
_sync_client: redis.Redis | None = None
_client_lock = threading.Lock()


def _client() -> redis.Redis:
    global _sync_client
    with _client_lock:
        if _sync_client is None:
            _sync_client = redis.Redis.from_url(
                str(settings.REDIS_URL), socket_timeout=1, socket_connect_timeout=0.5
            )
        return _sync_client


# A missing counter (a new or restarted Redis) starts from a random value, so a
# process can never mistake a restarted counter for the one its snapshot came from.
_BUMP = """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])
"""


def cache_version_bump() -> None:
    """Tell every gateway process to reload its keys and routes (never fails the
    caller: the write has committed already)."""
    try:
        _client().eval(_BUMP, 1, VERSION_KEY, secrets.randbits(52))
    except redis.RedisError as exc:
        log.warning("could not bump the gateway cache version: %s", exc)


def touches_gateway(sql: str) -> bool:
    """True when ``sql`` writes a column the gateway caches."""
    head = sql[:8].upper()
    if head.startswith(
        "TRUNCATE"
    ):  # PostgreSQL's flush (test teardown, manage.py flush)
        return any(f'"{table}"' in sql or f"`{table}`" in sql for table in WATCHED)
    if not (
        head.startswith("UPDATE")
        or head.startswith("INSERT")
        or head.startswith("DELETE")
    ):
        return False
    match = _TABLE.match(sql)
    if match is None or match.group(1) not in WATCHED:
        return False
    columns = WATCHED[match.group(1)]
    if columns is None or not head.startswith("UPDATE"):
        return True
    assignments = _SET.search(sql)
    if assignments is None:
        return True
    return any(c in columns for c in _COLUMN.findall(assignments.group(1)))


class quiet:
    """Within this block, writes do not bump (the usage flush's ``last_used_at``)."""

    def __enter__(self) -> None:
        _local.quiet = getattr(_local, "quiet", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _local.quiet -= 1


def _wrapper(
    execute: Callable[..., Any],
    sql: str,
    params: Any,
    many: bool,
    context: dict[str, Any],
) -> Any:
    result = execute(sql, params, many, context)
    if (
        isinstance(sql, str)
        and not getattr(_local, "quiet", 0)
        and touches_gateway(sql)
    ):
        connection = context["connection"]
        if connection.in_atomic_block:
            transaction.on_commit(cache_version_bump, using=connection.alias)
        else:
            cache_version_bump()
    return result


def _on_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    if _wrapper not in connection.execute_wrappers:
        connection.execute_wrappers.append(_wrapper)


def install() -> None:
    """Hook every database connection of this process (called from the app's
    ready())."""
    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection, dispatch_uid="gateway-cache-version")
