"""The playground sends the cluster's engine API key: an engine that requires it answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from console.engine_auth import engine_api_key
from tests.playground.conftest import MODEL, running_cluster
from tests.playground.test_consumer import PROMPT, connect, until
from tests.simengine import SimEngine, sim_engine

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
CLUSTER = "pg-keyed"


@pytest.fixture(scope="module")
def keyed_engine() -> Iterator[SimEngine]:
    with sim_engine(
        MODEL, extra_env={"VLLM_API_KEY": engine_api_key(CLUSTER) or ""}
    ) as running:
        yield running


async def test_it_streams_from_an_engine_that_requires_the_key(
    keyed_engine: SimEngine, operator: Any
) -> None:
    cluster = await sync_to_async(running_cluster)(keyed_engine, name=CLUSTER)
    comm = await connect(operator)
    await comm.send_json_to(
        {
            "type": "send",
            "id": 1,
            "cluster": cluster.pk,
            "messages": PROMPT,
            "max_tokens": 4,
        }
    )
    done, _ = await until(comm, "done")
    assert done["completion_tokens"] >= 1
    await comm.disconnect()
