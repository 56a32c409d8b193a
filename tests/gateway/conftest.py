"""A live gateway for the SDK tests: two sim engines (vLLM 0.33 and one posing as
pre-0.11.1) and uvicorn.

The engines and the server live for the whole module (they hold no database
state); each test makes its own clusters and keys, which the server reads from the
shared test database.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from console.gateway import changes
from console.gateway.services import apikey_create
from console.gateway.usage import FLUSHING_PREFIX, PENDING_KEY
from console.models import ClusterState, Node
from tests.factories import make_cluster, make_profile
from tests.integration.test_agent import wait_for
from tests.simengine import SimEngine, sim_engine

NEW_MODEL, OLD_MODEL = "gw-new", "gw-old"


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, SimEngine]]:
    with sim_engine(NEW_MODEL) as new, sim_engine(OLD_MODEL) as old:
        yield {NEW_MODEL: new, OLD_MODEL: old}


@pytest.fixture(scope="module")
def gateway_url(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    """uvicorn serving console.asgi on the test database; usage flushed after every
    request."""
    from tests.e2e.test_dashboard import uvicorn_server

    os.environ["GATEWAY_USAGE_FLUSH_S"] = "0"
    try:
        with uvicorn_server() as base:
            yield base
    finally:
        os.environ.pop("GATEWAY_USAGE_FLUSH_S", None)


@pytest.fixture(autouse=True)
def usage_settled(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the live gateway, wait until the gateway has written
    its usage counts: its flush runs after the response, and if it overlapped the
    test database's flush (TRUNCATE) PostgreSQL could break the deadlock by failing
    the flush, leaving this test's rows for the next one."""
    yield
    if "gateway_url" not in request.fixturenames:
        return
    client = changes._client()

    def settled() -> bool:
        pending = client.exists(PENDING_KEY)
        return not pending and not any(client.scan_iter(f"{FLUSHING_PREFIX}*"))

    time.sleep(0.3)  # a request charges its usage just after its last bytes
    wait_for(settled, timeout=30)  # a batch is deleted after its commit


def serve(model: str, engine: SimEngine, *, version: str, name: str) -> Any:
    """A Running 1-node cluster whose head is the sim engine serving ``model``."""
    profile = make_profile(
        name=f"{name} profile",
        served_model_name=model,
        vllm_version=version,
        data_parallel_size=1,
        tensor_parallel_size=8,
    )
    cluster = make_cluster(name=name, nodes=1, profile=profile)
    Node.objects.filter(cluster=cluster, rank=0).update(
        management_ip="127.0.0.1", api_port=engine.port
    )
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    return cluster


@pytest.fixture
def world(engines: dict[str, SimEngine], gateway_url: str) -> dict[str, Any]:
    """gw-new on a vLLM 0.33 cluster (native /v1/messages); gw-old on a cluster whose
    profile targets 0.10.2
    (no /v1/messages, so the gateway translates); one key with generous limits."""
    new = serve(NEW_MODEL, engines[NEW_MODEL], version="0.33.0", name="gw-new-c")
    old = serve(OLD_MODEL, engines[OLD_MODEL], version="0.10.2", name="gw-old-c")
    key, secret = apikey_create(name="apps", user=None, rpm=1000, tpm=10_000_000)
    return {"new": new, "old": old, "key": key, "secret": secret, "url": gateway_url}


def oai(world: dict[str, Any], key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{world['url']}/v1", api_key=key or world["secret"], max_retries=0
    )


def anth(world: dict[str, Any], key: str | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=world["url"], api_key=key or world["secret"], max_retries=0
    )
