"""Monitoring's Redis: the collect rounds' bookkeeping and the evaluation lock."""

from __future__ import annotations

import redis
from django.conf import settings


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(str(settings.REDIS_URL))
