"""Several web worker processes (WEB_CONCURRENCY, uvicorn --workers): a revocation or
a cluster leaving the pool takes effect in every process from the next request, usage
from all processes adds up exactly, and least-outstanding routing sees the other
processes' requests in flight."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings

from console.gateway import peers
from console.gateway.services import apikey_create, apikey_revoke
from console.models import ApiUsage, ClusterState
from tests.agents import database_url, die_with_parent
from tests.factories import free_port
from tests.gateway.conftest import NEW_MODEL, SimEngine, serve
from tests.integration.test_agent import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def two_workers(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "WEB_CONCURRENCY": "2",
        "GATEWAY_USAGE_FLUSH_S": "1",
    }
    argv = [sys.executable, "-m", "console.serve", "console.asgi:application"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    argv += ["--workers", "2"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, preexec_fn=die_with_parent)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=60)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _post(base: str, secret: str) -> httpx.Response:
    # a new connection each time, so the two processes share the requests
    return httpx.post(
        f"{base}/v1/completions",
        json={"model": NEW_MODEL, "prompt": "hi", "max_tokens": 2},
        headers={"Authorization": f"Bearer {secret}", "Connection": "close"},
        timeout=30,
    )


def test_revocation_pool_changes_and_usage_hold_across_worker_processes(
    engines: dict[str, SimEngine], two_workers: str
) -> None:
    cluster = serve(NEW_MODEL, engines[NEW_MODEL], version="0.33.0", name="gw-new-c")
    key, secret = apikey_create(name="shared", user=None, rpm=1000, tpm=10_000_000)
    answers = [_post(two_workers, secret) for _ in range(24)]
    assert [a.status_code for a in answers] == [200] * 24
    completion = sum(a.json()["usage"]["completion_tokens"] for a in answers)
    row = wait_for(
        lambda: ApiUsage.objects.filter(key=key, requests=24).first(), timeout=30
    )
    assert row.completion_tokens == completion  # every process's counts, once each

    cluster.state = ClusterState.DRAINING
    cluster.save(update_fields=["state"])
    assert {_post(two_workers, secret).status_code for _ in range(8)} == {503}
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    assert {_post(two_workers, secret).status_code for _ in range(8)} == {200}

    apikey_revoke(key=key, user=None)
    assert {_post(two_workers, secret).status_code for _ in range(8)} == {401}


def test_each_process_sees_the_others_requests_in_flight(monkeypatch: Any) -> None:
    client_url = str(settings.REDIS_URL)

    async def as_process(pid: int, mine: dict[int, int]) -> dict[int, int]:
        import redis.asyncio as aioredis

        monkeypatch.setattr(os, "getpid", lambda: pid)
        client = aioredis.Redis.from_url(client_url)
        try:
            return await peers.exchange(client, mine)
        finally:
            await client.aclose()

    assert async_to_sync(as_process)(101, {7: 3, 8: 1}) == {}
    assert async_to_sync(as_process)(102, {7: 2}) == {7: 3, 8: 1}
    assert async_to_sync(as_process)(101, {7: 0, 8: 1}) == {7: 2}
    redis.Redis.from_url(client_url).delete(f"gw:out:{os.uname().nodename}:102")
    assert async_to_sync(as_process)(101, {}) == {}  # a process that died drops out
