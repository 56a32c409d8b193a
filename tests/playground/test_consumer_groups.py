"""The playground socket survives every event its watched cluster's group carries."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from tests.playground.conftest import Engine, running_cluster
from tests.playground.test_consumer import connect

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


async def test_it_keeps_the_socket_through_telemetry_and_operation_pushes(
    engine: Engine, operator: Any
) -> None:
    cluster = await sync_to_async(running_cluster)(engine, name="pg-groups")
    comm = await connect(operator)
    await comm.send_json_to({"type": "watch", "cluster": cluster.pk})
    assert (await comm.receive_json_from(timeout=5))["type"] == "state"
    layer = get_channel_layer()
    for kind in ("telemetry.update", "operation.progress"):
        await layer.group_send(f"cluster-{cluster.pk}", {"type": kind, "nodes": {}})
    # Still open and answering: a watch gets its state back (a crashed consumer would not).
    await comm.send_json_to({"type": "watch", "cluster": cluster.pk})
    assert (await comm.receive_json_from(timeout=5))["type"] == "state"
    await comm.disconnect()
