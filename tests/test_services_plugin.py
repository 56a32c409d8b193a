"""The test-session plugin's Redis split under pytest-xdist (tests/services.py): each
worker process gets a database of its own on a shared REDIS_URL, so two workers'
Celery queues and counters never meet."""

from __future__ import annotations

from tests.services import worker_redis_url


def test_worker_databases_follow_the_one_given() -> None:
    url = "redis://127.0.0.1:6379/9"
    assert worker_redis_url(url, "gw0") == url
    assert worker_redis_url(url, "gw1") == "redis://127.0.0.1:6379/10"
    assert worker_redis_url("redis://:pw@h:1", "gw2") == "redis://:pw@h:1/2"
    assert (
        worker_redis_url("redis://h:1/0?timeout=1", "gw3") == "redis://h:1/3?timeout=1"
    )
