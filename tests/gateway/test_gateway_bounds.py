"""The gateway against careless and dodging clients: a hang-up mid-stream is still
charged, n and max_tokens are bounded, malformed input gets 400 (never 500), an
unreachable engine gets 502, and the engine's API key goes upstream."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from console.gateway.services import apikey_create
from console.models import ApiUsage, Node
from tests.factories import free_port
from tests.gateway.conftest import NEW_MODEL, OLD_MODEL, SimEngine, anth, oai, serve
from tests.integration.test_agent import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MESSAGES = [{"role": "user", "content": "Tell a long story."}]


@pytest.fixture
def world(engines: dict[str, SimEngine], gateway_url: str) -> dict[str, Any]:
    new = serve(NEW_MODEL, engines[NEW_MODEL], version="0.33.0", name="gw-new-c")
    old = serve(OLD_MODEL, engines[OLD_MODEL], version="0.10.2", name="gw-old-c")
    key, secret = apikey_create(name="apps", user=None, rpm=1000, tpm=10_000_000)
    return {"new": new, "old": old, "key": key, "secret": secret, "url": gateway_url}


def _same_minute(needed_s: float = 8) -> None:
    """Start where the rate-limit window (a clock minute) has ``needed_s`` left."""
    left = 60 - time.time() % 60
    if left < needed_s:
        time.sleep(left + 0.2)


def _hang_up_after(
    url: str, headers: dict[str, str], body: dict[str, Any], n: int
) -> int:
    seen = 0
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: {"):  # one event (a token, or a header event)
                seen += 1
            if seen == n:
                break  # leave before the final usage chunk
    return seen


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_client_that_hangs_up_mid_stream_is_charged_for_what_was_streamed(
    world: dict[str, Any], engines: dict[str, SimEngine], protocol: str
) -> None:
    _same_minute()
    key, secret = apikey_create(name=f"dodger-{protocol}", user=None, rpm=100, tpm=40)
    before = engines[NEW_MODEL].aborts()
    if protocol == "openai":
        url, headers = (
            f"{world['url']}/v1/chat/completions",
            {"Authorization": f"Bearer {secret}"},
        )
    else:
        url, headers = f"{world['url']}/v1/messages", {"x-api-key": secret}
    body = {
        "model": NEW_MODEL,
        "messages": MESSAGES,
        "max_tokens": 8000,
        "ignore_eos": True,
        "stream": True,
    }
    assert _hang_up_after(url, headers, body, 50) == 50
    wait_for(lambda: engines[NEW_MODEL].aborts() > before, timeout=30)
    row = wait_for(
        lambda: ApiUsage.objects.filter(key=key, completion_tokens__gte=50).first(),
        timeout=30,
    )
    assert row.requests == 1 and row.prompt_tokens > 0
    # The 50 streamed tokens count against the key's 40 tokens a minute.
    with pytest.raises(openai.RateLimitError) as limited:
        oai(world, key=secret).completions.create(
            model=NEW_MODEL, prompt="hi", max_tokens=2
        )
    assert "40 tokens per minute" in limited.value.body["message"]  # type: ignore[index]


def test_n_and_max_tokens_are_bounded_with_a_400_naming_the_field(
    world: dict[str, Any],
) -> None:
    client = oai(world)
    with pytest.raises(openai.BadRequestError) as many:
        client.chat.completions.create(
            model=NEW_MODEL, messages=MESSAGES, max_tokens=4, n=1000
        )  # type: ignore[arg-type]
    assert many.value.body["param"] == "n"  # type: ignore[index]
    assert "from 1 to 8" in many.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as long:
        client.completions.create(model=NEW_MODEL, prompt="hi", max_tokens=10**9)
    assert long.value.body["param"] == "max_tokens"  # type: ignore[index]
    assert "32768" in long.value.body["message"]  # type: ignore[index]  # max_model_len
    with pytest.raises(openai.BadRequestError) as newer:
        client.chat.completions.create(
            model=NEW_MODEL, messages=MESSAGES, max_completion_tokens=0
        )  # type: ignore[arg-type]
    assert newer.value.body["param"] == "max_completion_tokens"  # type: ignore[index]
    missing = httpx.post(
        f"{world['url']}/v1/messages",
        json={"model": NEW_MODEL, "messages": MESSAGES},
        headers={"x-api-key": world["secret"]},
    )
    assert missing.status_code == 400 and missing.json()["type"] == "error"
    assert "max_tokens is required" in missing.json()["error"]["message"]
    assert (
        client.chat.completions.create(
            model=NEW_MODEL, messages=MESSAGES, max_tokens=3, n=1
        ).choices  # type: ignore[arg-type]
        is not None
    )  # within the bounds: served


@pytest.mark.parametrize(
    ("content", "param"),
    [
        (json.dumps({"model": "gw-new\x00x", "messages": MESSAGES}), "model"),
        (json.dumps({"model": "\x00", "prompt": "hi"}), "model"),
        ('{"model": "gw-new", "messages": ' + "[" * 5000 + "]" * 5000 + "}", None),
        ("[" * 5000 + "]" * 5000, None),
        ('{"model": 7, "prompt": "hi"}', "model"),
    ],
)
def test_malformed_requests_get_400_never_500(
    world: dict[str, Any], content: str, param: str | None
) -> None:
    for path, header in (
        ("/v1/chat/completions", {"Authorization": f"Bearer {world['secret']}"}),
        ("/v1/completions", {"Authorization": f"Bearer {world['secret']}"}),
        ("/v1/messages", {"x-api-key": world["secret"]}),
        ("/v1/messages/count_tokens", {"x-api-key": world["secret"]}),
    ):
        resp = httpx.post(
            world["url"] + path,
            content=content.encode(),
            headers={**header, "Content-Type": "application/json"},
            timeout=30,
        )
        assert resp.status_code == 400, (path, resp.status_code, resp.text[:300])
        error = resp.json()["error"]
        if param and "param" in error:
            assert error["param"] == param


def test_headers_passed_on_to_the_engine_are_checked_first(
    world: dict[str, Any],
) -> None:
    # anthropic-version goes on to the engine: a value that is not a plain version
    # gets a 400 naming the header; an odd X-Request-ID is replaced, not refused
    body = {"model": NEW_MODEL, "max_tokens": 4, "messages": MESSAGES}
    base = {"x-api-key": world["secret"], "Content-Type": "application/json"}
    # (control characters never get this far: the HTTP parser refuses them)
    for bad in ("2023-06-01 x", "2023/06/01", "v" * 33):
        resp = httpx.post(
            world["url"] + "/v1/messages",
            content=json.dumps(body).encode(),
            headers={**base, "anthropic-version": bad},
            timeout=30,
        )
        assert resp.status_code == 400, (bad, resp.status_code, resp.text[:300])
        assert "anthropic-version" in resp.json()["error"]["message"]
    resp = httpx.post(
        world["url"] + "/v1/messages",
        content=json.dumps(body).encode(),
        headers={**base, "anthropic-version": "2023-06-01", "X-Request-ID": "a b;c"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text[:300]


def test_count_tokens_with_the_engine_refusing_connections_answers_502(
    world: dict[str, Any],
) -> None:
    Node.objects.filter(cluster=world["old"]).update(api_port=free_port())
    with pytest.raises(anthropic.APIStatusError) as failed:
        anth(world).messages.count_tokens(model=OLD_MODEL, messages=MESSAGES)  # type: ignore[arg-type]
    assert failed.value.status_code == 502
    assert "gw-old-c" in failed.value.body["error"]["message"]  # type: ignore[index]


def test_unknown_gateway_paths_get_404_in_openais_shape(world: dict[str, Any]) -> None:
    resp = httpx.post(
        f"{world['url']}/v1/embeddings",
        json={"model": NEW_MODEL},
        headers={"Authorization": f"Bearer {world['secret']}"},
    )
    assert resp.status_code == 404 and resp.json()["error"]["type"] == "not_found_error"
