"""WebSockets: logged-in users get their cluster's events through the Redis channel layer; anonymous sockets are refused."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from console.asgi import application
from console.live import publish

ORIGIN = (b"origin", b"http://127.0.0.1")


def session_headers(user: Any) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    return [(b"cookie", cookie.encode()), ORIGIN, (b"host", b"127.0.0.1")]


@pytest.mark.django_db(transaction=True)
async def test_it_round_trips_through_the_redis_layer(
    cluster: Any, viewer: Any
) -> None:
    assert (
        settings.CHANNEL_LAYERS["default"]["BACKEND"]
        == "channels_redis.core.RedisChannelLayer"
    )
    headers = await sync_to_async(session_headers)(viewer)
    other_id = await sync_to_async(
        lambda: (
            __import__("console.models", fromlist=["Cluster"])
            .Cluster.objects.get(name="qwen35-standby")
            .pk
        )
    )()
    comm = WebsocketCommunicator(
        application, f"/ws/clusters/{cluster.pk}/", headers=headers
    )
    connected, _ = await comm.connect()
    assert connected
    assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
    await sync_to_async(publish)(
        f"cluster-{other_id}", "cluster.state", {"state": "running"}
    )
    await sync_to_async(publish)(
        f"cluster-{cluster.pk}",
        "cluster.state",
        {"state": "starting", "cluster": cluster.pk},
    )
    message = await comm.receive_json_from(timeout=5)
    assert message == {
        "type": "cluster.state",
        "state": "starting",
        "cluster": cluster.pk,
    }
    assert await comm.receive_nothing(
        timeout=0.3
    )  # the other cluster's event never arrived
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_it_refuses_anonymous_sockets(cluster: Any) -> None:
    comm = WebsocketCommunicator(
        application,
        f"/ws/clusters/{cluster.pk}/",
        headers=[ORIGIN, (b"host", b"127.0.0.1")],
    )
    connected, code = await comm.connect()
    assert not connected and code == 4403
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_it_refuses_a_foreign_origin(cluster: Any, viewer: Any) -> None:
    headers = [
        h for h in await sync_to_async(session_headers)(viewer) if h[0] != b"origin"
    ] + [(b"origin", b"http://evil.example")]
    comm = WebsocketCommunicator(
        application, f"/ws/clusters/{cluster.pk}/", headers=headers
    )
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_it_pushes_an_ingested_round_to_its_cluster_only(
    cluster: Any, viewer: Any
) -> None:
    from console.models import Cluster
    from monitoring.ingest import NodeResult, ingest_round
    from tests.monitoring.samples import agent_sample

    headers = await sync_to_async(session_headers)(viewer)
    other = await sync_to_async(Cluster.objects.get)(name="qwen35-standby")
    mine = WebsocketCommunicator(
        application, f"/ws/clusters/{cluster.pk}/", headers=headers
    )
    theirs = WebsocketCommunicator(
        application, f"/ws/clusters/{other.pk}/", headers=headers
    )
    assert (await mine.connect())[0] and (await theirs.connect())[0]
    assert (await mine.receive_json_from(timeout=5))["type"] == "hello"
    assert (await theirs.receive_json_from(timeout=5))["type"] == "hello"
    nodes = await sync_to_async(cluster.ranked_nodes)()
    results = [NodeResult(n.pk, sample=agent_sample(n.name)) for n in nodes]
    await sync_to_async(ingest_round)(
        nodes=results, scrapes=[]
    )  # publishes after its transaction commits
    message = await mine.receive_json_from(timeout=5)
    assert message["type"] == "telemetry.update" and message["cluster"] == cluster.pk
    assert sorted(message["nodes"]) == [n.name for n in nodes]
    assert message["nodes"]["ascend-01"]["chips"][0][:3] == [0, 0, 40.0]
    assert await theirs.receive_nothing(timeout=0.5)
    await mine.disconnect()
    await theirs.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_it_keeps_a_socket_open_on_an_idle_channel_layer(
    cluster: Any, viewer: Any
) -> None:
    """An idle socket outlives the channel layer's blocking read several times over.

    channels-redis blocks in BZPOPMIN for 5 s per receive and redis-py's default read
    timeout is also 5 s: with the defaults the consumer died with TimeoutError after
    about 5 idle seconds and every live page dropped its socket.
    """
    import asyncio

    headers = await sync_to_async(session_headers)(viewer)
    comm = WebsocketCommunicator(
        application, f"/ws/clusters/{cluster.pk}/", headers=headers
    )
    assert (await comm.connect())[0]
    assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
    await asyncio.sleep(16)  # > 3 blocking pops with nothing to read
    assert not comm.future.done(), comm.future.exception()
    await sync_to_async(publish)(
        f"cluster-{cluster.pk}", "cluster.state", {"state": "running"}
    )
    message = await comm.receive_json_from(timeout=5)
    assert message["type"] == "cluster.state" and message["state"] == "running"
    await comm.disconnect()
