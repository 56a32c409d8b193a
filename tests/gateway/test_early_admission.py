"""Early admission: a key well under its limits has its request sent on to the engine
while its admission round trip is on the wire; the admission still decides the
answer (a revoked key gets 401, a cluster that left the pool 503, the engine's
request is aborted), and a key near a limit waits for its admission, so requests
past the limit never reach the engine."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from console.gateway.services import apikey_create, apikey_revoke
from console.models import ClusterState
from tests.gateway.conftest import NEW_MODEL, SimEngine
from tests.integration.test_agent import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STREAM = {
    "model": NEW_MODEL,
    "messages": [{"role": "user", "content": "Tell a long story."}],
    "max_tokens": 8000,
    "ignore_eos": True,  # long enough to be running when the gateway drops it
    "stream": True,
}


def _window_left(needed_s: float = 10) -> None:
    """Start where the rate-limit window (a clock minute) has ``needed_s`` left: the
    first request of a window always waits for its admission."""
    left = 60 - time.time() % 60
    if left < needed_s:
        time.sleep(left + 0.2)


def _post(world: dict[str, Any], secret: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{world['url']}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {secret}"},
        timeout=60,
    )


def _heard_of(world: dict[str, Any], secret: str, engine: SimEngine) -> float:
    """One admitted request of ``secret`` in a window with time left (the gateway
    process now knows the window); the engine's aborts so far."""
    _window_left()
    first = _post(world, secret, {**STREAM, "max_tokens": 2, "stream": False})
    assert first.status_code == 200
    return engine.aborts()


def _finished(engine: SimEngine) -> float:
    return engine.metric("vllm:request_success_total")


@pytest.mark.parametrize(("change", "status"), [("revoke", 401), ("drain", 503)])
def test_a_change_meanwhile_decides_the_answer_and_the_engine_drops_the_request(
    world: dict[str, Any], engines: dict[str, SimEngine], change: str, status: int
) -> None:
    engine = engines[NEW_MODEL]
    key, secret = apikey_create(name=f"early-{change}", user=None, rpm=1000, tpm=10**9)
    before = _heard_of(world, secret, engine)
    if change == "revoke":
        apikey_revoke(key=key, user=None)
    else:  # the cluster leaves the pool
        cluster = world["new"]
        cluster.state = ClusterState.DRAINING
        cluster.save(update_fields=["state"])
    refused = _post(world, secret, STREAM)
    assert refused.status_code == status, refused.text
    if status == 503:
        assert int(refused.headers["Retry-After"]) > 0
    # it had gone on early (the process did not know of the change yet): the engine
    # saw it, and the gateway's hang-up aborted it
    wait_for(lambda: engine.aborts() > before, timeout=30)


def test_requests_past_the_limit_never_reach_the_engine(
    world: dict[str, Any], engines: dict[str, SimEngine]
) -> None:
    engine = engines[NEW_MODEL]
    _, secret = apikey_create(name="early-tight", user=None, rpm=3, tpm=10**9)
    _window_left()
    small = {**STREAM, "max_tokens": 2, "stream": False}
    for _ in range(3):
        assert _post(world, secret, small).status_code == 200
    wait_for(lambda: _finished(engine) > 0, timeout=10)
    time.sleep(0.5)
    before = _finished(engine)
    for _ in range(3):
        refused = _post(world, secret, STREAM)
        assert refused.status_code == 429, refused.text
    time.sleep(1.0)  # an aborted request would have been counted by now
    assert _finished(engine) == before
