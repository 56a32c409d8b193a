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

from console.gateway import ratelimit
from console.gateway.services import apikey_create, apikey_revoke
from console.models import ClusterState
from tests.gateway.conftest import NEW_MODEL, SimEngine
from tests.integration.test_agent import wait_for

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


def _finished(engine: SimEngine) -> float:
    return engine.metric("vllm:request_success_total")


class TestComfortable:
    """Which requests may go on early, from what the process last heard."""

    def setup_method(self) -> None:
        ratelimit._seen.clear()
        ratelimit._early.clear()

    def test_nothing_heard_of_this_window_waits(self) -> None:
        assert not ratelimit.comfortable("k", rpm=1000, tpm=10**9)
        start, _ = ratelimit._window()
        ratelimit.admission_of([b"1", 5, b"0"], "k", start - 60)  # the last window
        assert not ratelimit.comfortable("k", rpm=1000, tpm=10**9)

    def test_well_under_both_limits_goes_early(self) -> None:
        start, _ = ratelimit._window()
        ratelimit.admission_of([b"1", 8, b"100"], "k", start)
        assert ratelimit.comfortable("k", rpm=10, tpm=1000)  # 9 of 10, 100 of 1000

    def test_near_a_limit_waits_counting_what_went_early(self) -> None:
        start, _ = ratelimit._window()
        ratelimit.admission_of([b"1", 9, b"0"], "k", start)
        assert not ratelimit.comfortable("k", rpm=10, tpm=1000)  # the 10th of 10
        ratelimit.admission_of([b"1", 8, b"900"], "k", start)
        assert not ratelimit.comfortable("k", rpm=10, tpm=1000)  # 900 of 1000 tokens
        ratelimit.admission_of([b"1", 8, b"0"], "k", start)
        assert ratelimit.comfortable("k", rpm=10, tpm=1000)
        ratelimit.early_start("k")  # one sent on, its admission not back yet
        assert not ratelimit.comfortable("k", rpm=10, tpm=1000)
        ratelimit.early_end("k")
        assert ratelimit.comfortable("k", rpm=10, tpm=1000)
        assert not ratelimit.comfortable("k", rpm=0, tpm=1000)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_key_revoked_meanwhile_gets_401_and_the_engine_drops_the_request(
    world: dict[str, Any], engines: dict[str, SimEngine]
) -> None:
    engine = engines[NEW_MODEL]
    key, secret = apikey_create(name="early-rev", user=None, rpm=1000, tpm=10**9)
    _window_left()
    first = _post(world, secret, {**STREAM, "max_tokens": 2, "stream": False})
    assert first.status_code == 200  # admitted first: the window is heard of
    before = engine.aborts()
    apikey_revoke(key=key, user=None)
    refused = _post(world, secret, STREAM)
    assert refused.status_code == 401, refused.text
    # it had gone on early (the process did not know of the revocation yet): the
    # engine saw it, and the gateway's hang-up aborted it
    wait_for(lambda: engine.aborts() > before, timeout=30)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_cluster_that_left_the_pool_meanwhile_gets_503(
    world: dict[str, Any], engines: dict[str, SimEngine]
) -> None:
    engine = engines[NEW_MODEL]
    _window_left()
    first = _post(world, world["secret"], {**STREAM, "max_tokens": 2, "stream": False})
    assert first.status_code == 200
    before = engine.aborts()
    cluster = world["new"]
    cluster.state = ClusterState.DRAINING
    cluster.save(update_fields=["state"])
    refused = _post(world, world["secret"], STREAM)
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
    wait_for(lambda: engine.aborts() > before, timeout=30)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
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
