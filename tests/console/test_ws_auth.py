"""Every console socket is authorized by one base consumer: at connect, before every message,
and when the user's access changes (demotion, deactivation, logout), through the Redis layer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from console.asgi import application
from console.consumers import CLOSE_FORBIDDEN, CLOSE_REVOKED, AuthorizedConsumer
from console.permissions import set_user_role
from tests.monitoring.test_consumers import ORIGIN

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def logged_in(user: Any) -> tuple[Client, list[tuple[bytes, bytes]]]:
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    return client, [(b"cookie", cookie.encode()), ORIGIN, (b"host", b"127.0.0.1")]


async def opened(path: str, user: Any) -> tuple[Client, WebsocketCommunicator]:
    client, headers = await sync_to_async(logged_in)(user)
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await comm.connect(timeout=5)
    assert connected, code
    return client, comm


async def closed_with(comm: WebsocketCommunicator, timeout: float = 5) -> int:
    """Skip pushed messages until the server closes the socket; return its close code."""
    while True:
        out = await comm.receive_output(timeout=timeout)
        if out["type"] == "websocket.close":
            return int(out["code"])


async def drain(comm: WebsocketCommunicator) -> int | None:
    """Read what the server sent until it goes quiet; the close code if it closed, else None
    (receive_nothing: a timed-out receive_output would kill the consumer under test)."""
    while not await comm.receive_nothing(timeout=0.5):
        out = await comm.receive_output(timeout=1)
        if out["type"] == "websocket.close":
            return int(out["code"])
    return None


async def paths(cluster: Any) -> list[str]:
    from console.models import Operation

    op = await sync_to_async(Operation.objects.create)(cluster=cluster, kind="start")
    return [
        f"/ws/clusters/{cluster.pk}/",
        "/ws/alerts/",
        f"/ws/operations/{op.pk}/",
        "/ws/playground/",
    ]


def test_every_console_socket_uses_the_one_base_consumer() -> None:
    from console.routing import websocket_urlpatterns

    consumers = {p.callback.consumer_class for p in websocket_urlpatterns}
    assert len(consumers) == 4
    assert all(issubclass(c, AuthorizedConsumer) for c in consumers)


async def test_a_demoted_operator_loses_every_socket_at_once(
    cluster: Any, operator: Any
) -> None:
    socks = [(await opened(path, operator))[1] for path in await paths(cluster)]
    await sync_to_async(set_user_role)(operator, "viewer")
    # the playground needs operator: it closes; the viewer pages stay open
    assert await closed_with(socks[3]) == CLOSE_REVOKED
    for comm in socks[:3]:
        await comm.send_to(text_data="{}")
        assert await drain(comm) is None  # still open
    for comm in socks[:3]:
        await comm.disconnect()


async def test_a_deactivated_user_loses_every_socket(
    cluster: Any, operator: Any
) -> None:
    socks = [(await opened(path, operator))[1] for path in await paths(cluster)]
    operator.is_active = False
    await sync_to_async(operator.save)()
    for comm in socks:
        assert await closed_with(comm) == CLOSE_REVOKED


async def test_a_logout_closes_that_sessions_sockets_only(
    cluster: Any, operator: Any
) -> None:
    path = f"/ws/clusters/{cluster.pk}/"
    client, comm = await opened(path, operator)
    _, other = await opened(path, operator)  # the same user in another browser
    answer = await sync_to_async(client.post)("/accounts/logout/")
    assert answer.status_code in (200, 302)
    assert await closed_with(comm) == CLOSE_REVOKED
    assert await drain(other) is None
    await other.disconnect()


async def test_a_message_after_a_silent_demotion_closes_the_socket(
    operator: Any,
) -> None:
    """A change no signal sees (a raw UPDATE) is still caught on the next message."""
    from django.contrib.auth import get_user_model

    _, comm = await opened("/ws/playground/", operator)
    through = get_user_model().groups.through
    await sync_to_async(lambda: through.objects.filter(user_id=operator.pk).delete())()
    await comm.send_json_to({"type": "watch", "cluster": 1})
    assert await closed_with(comm) == CLOSE_REVOKED


async def test_a_socket_of_a_user_without_the_role_is_refused(viewer: Any) -> None:
    _, headers = await sync_to_async(logged_in)(viewer)
    comm = WebsocketCommunicator(application, "/ws/playground/", headers=headers)
    connected, code = await comm.connect(timeout=5)
    assert not connected and code == CLOSE_FORBIDDEN


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        "[" * 5000 + "]" * 5000,
        '{"type": "watch", "cluster": 1e400}',
        '{"type": "watch", "cluster": 99999999999999999999999}',
        '{"type": "watch", "cluster": true}',
        '{"type": "send", "cluster": -1e308}',
        "x" * 300_000,
    ],
)
async def test_a_bad_frame_gets_an_error_and_the_socket_lives(
    operator: Any, frame: str
) -> None:
    _, comm = await opened("/ws/playground/", operator)
    await comm.send_to(text_data=frame)
    answer = await comm.receive_json_from(timeout=5)
    assert answer["type"] == "error", answer
    await comm.send_to(text_data=json.dumps({"type": "nonsense"}))
    assert (await comm.receive_json_from(timeout=5))["field"] == "type"
    await comm.disconnect()


async def test_a_binary_frame_gets_an_error(operator: Any) -> None:
    _, comm = await opened("/ws/playground/", operator)
    await comm.send_to(bytes_data=b"\x00\x01")
    assert (await comm.receive_json_from(timeout=5))["type"] == "error"
    await comm.disconnect()
