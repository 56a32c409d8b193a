from __future__ import annotations

import redis
from django.conf import settings


def redis_ping(timeout: float = 1.0) -> tuple[bool, str]:
    """PING the Redis that carries Celery and Channels; returns (ok, error message)."""
    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL or "",
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
        )
        try:
            client.ping()
        finally:
            client.close()
    except redis.RedisError as exc:
        return False, str(exc)[:200]
    return True, ""
