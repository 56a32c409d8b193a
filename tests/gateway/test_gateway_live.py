"""The official openai and anthropic SDKs against the gateway (uvicorn) in front of
running sim engines."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from console.gateway.services import apikey_create
from console.models import ApiUsage, ClusterState, Node
from tests.factories import free_port
from tests.gateway.conftest import NEW_MODEL, OLD_MODEL, SimEngine, anth, oai, serve
from tests.integration.test_agent import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


MESSAGES = [{"role": "user", "content": "Say something about Ascend NPUs."}]


def test_it_relays_chat_and_completions_with_usage_and_counts_them(
    world: dict[str, Any], admin: Any
) -> None:
    client = oai(world)
    assert [m.id for m in client.models.list().data] == [NEW_MODEL, OLD_MODEL]

    reply = client.chat.completions.create(
        model=NEW_MODEL, messages=MESSAGES, max_tokens=20
    )  # type: ignore[arg-type]
    assert reply.choices[0].message.content and reply.usage is not None
    assert reply.usage.completion_tokens > 0 and reply.usage.prompt_tokens > 0

    chunks = list(
        client.chat.completions.create(
            model=NEW_MODEL,
            messages=MESSAGES,
            max_tokens=20,
            stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    streamed_usage = chunks[-1].usage
    assert (
        len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    )  # relayed piece by piece
    assert text and streamed_usage is not None and streamed_usage.completion_tokens > 0

    # Without include_usage the client gets no usage chunk, although the gateway asked
    # the engine for one.
    plain = list(
        client.chat.completions.create(
            model=NEW_MODEL, messages=MESSAGES, max_tokens=5, stream=True
        )
    )  # type: ignore[arg-type]
    assert all(c.choices for c in plain) and all(c.usage is None for c in plain)

    done = client.completions.create(
        model=NEW_MODEL, prompt="Ascend 910B has", max_tokens=8
    )
    assert (
        done.choices[0].text
        and done.usage is not None
        and done.usage.completion_tokens > 0
    )

    row = wait_for(
        lambda: ApiUsage.objects.filter(
            key=world["key"], model=NEW_MODEL, requests=4
        ).first()
    )
    expected_completion = (
        reply.usage.completion_tokens
        + streamed_usage.completion_tokens
        + done.usage.completion_tokens
    )
    assert (
        row.completion_tokens >= expected_completion
    )  # + the 5-token plain stream, counted by the gateway
    assert row.prompt_tokens >= reply.usage.prompt_tokens + streamed_usage.prompt_tokens

    from tests.conftest import login

    page = login(admin).get("/apikeys/")
    assert page.status_code == 200
    assert f"<td>apps</td><td>{NEW_MODEL}</td><td>4</td>" in page.content.decode()


@pytest.mark.parametrize(("model", "native"), [(NEW_MODEL, True), (OLD_MODEL, False)])
def test_it_serves_anthropic_messages_natively_or_translated(
    world: dict[str, Any], model: str, native: bool
) -> None:
    client = anth(world)
    msg = client.messages.create(
        model=model, max_tokens=24, system="Be brief.", messages=MESSAGES
    )  # type: ignore[arg-type]
    assert msg.content[0].type == "text" and msg.content[0].text
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert msg.stop_reason in ("end_turn", "max_tokens")
    # The engine names a native message "msg-…"; a translated one carries the chat
    # completion's id.
    assert msg.id.startswith("msg_chatcmpl-") is not native

    with client.messages.stream(
        model=model, max_tokens=24, messages=MESSAGES
    ) as stream:  # type: ignore[arg-type]
        events = [e.type for e in stream]
        final = stream.get_final_message()
    kinds = [e for e in events if e not in ("text", "ping")]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"} and len(kinds[2:-3]) > 1
    assert final.content[0].text and final.usage.output_tokens > 0

    count = client.messages.count_tokens(
        model=model, system="Be brief.", messages=MESSAGES
    )  # type: ignore[arg-type]
    assert count.input_tokens == msg.usage.input_tokens


def test_it_answers_errors_in_each_protocols_shape(world: dict[str, Any]) -> None:
    url = world["url"]
    with pytest.raises(openai.AuthenticationError):
        oai(world, key="avc-not-a-key").chat.completions.create(
            model=NEW_MODEL, messages=MESSAGES, max_tokens=4
        )  # type: ignore[arg-type]
    with pytest.raises(anthropic.AuthenticationError) as denied:
        anth(world, key="avc-not-a-key").messages.create(
            model=NEW_MODEL, max_tokens=4, messages=MESSAGES
        )  # type: ignore[arg-type]
    assert (
        denied.value.body["type"] == "error"
        and denied.value.body["error"]["type"] == "authentication_error"
    )  # type: ignore[index]
    assert (
        httpx.post(f"{url}/v1/chat/completions", json={"model": NEW_MODEL}).status_code
        == 401
    )  # no key at all

    with pytest.raises(openai.NotFoundError) as missing:
        oai(world).chat.completions.create(
            model="no-such-model", messages=MESSAGES, max_tokens=4
        )  # type: ignore[arg-type]
    assert "no-such-model" in missing.value.body["message"]  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError) as missing_a:
        anth(world).messages.create(
            model="no-such-model", max_tokens=4, messages=MESSAGES
        )  # type: ignore[arg-type]
    assert missing_a.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]

    bad = httpx.post(
        f"{url}/v1/chat/completions",
        content=b'{"model": "gw-new", ',
        headers={"Authorization": f"Bearer {world['secret']}"},
    )
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
    bad_a = httpx.post(
        f"{url}/v1/messages", content=b"[1]", headers={"x-api-key": world["secret"]}
    )
    assert (
        bad_a.status_code == 400
        and bad_a.json()["error"]["message"]
        == "The request body must be a JSON object."
    )

    # A restart drains the cluster first: new requests get 503 + Retry-After, in both
    # shapes.
    world["new"].state = ClusterState.DRAINING
    world["new"].save(update_fields=["state"])
    with pytest.raises(openai.InternalServerError) as busy:
        oai(world).chat.completions.create(
            model=NEW_MODEL, messages=MESSAGES, max_tokens=4
        )  # type: ignore[arg-type]
    assert (
        busy.value.status_code == 503
        and int(busy.value.response.headers["Retry-After"]) > 0
    )
    assert "draining" in busy.value.body["message"]  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as busy_a:
        anth(world).messages.create(model=NEW_MODEL, max_tokens=4, messages=MESSAGES)  # type: ignore[arg-type]
    assert (
        busy_a.value.status_code == 503 and busy_a.value.response.headers["Retry-After"]
    )
    assert busy_a.value.body == {
        "type": "error",
        "error": {
            "type": "overloaded_error",
            "message": busy_a.value.body["error"]["message"],
        },
    }  # type: ignore[index]
    assert NEW_MODEL not in [m.id for m in oai(world).models.list().data]


def test_it_limits_requests_per_key_with_429_and_revoked_keys_get_401(
    world: dict[str, Any],
) -> None:
    key, secret = apikey_create(name="tight", user=None, rpm=2, tpm=1_000_000)
    client = oai(world, key=secret)
    for _ in range(2):
        client.completions.create(model=NEW_MODEL, prompt="hi", max_tokens=2)
    with pytest.raises(openai.RateLimitError) as limited:
        client.completions.create(model=NEW_MODEL, prompt="hi", max_tokens=2)
    assert 0 < int(limited.value.response.headers["Retry-After"]) <= 60
    assert "2 requests per minute" in limited.value.body["message"]  # type: ignore[index]
    oai(world).completions.create(
        model=NEW_MODEL, prompt="hi", max_tokens=2
    )  # other keys are not affected

    from console.gateway.services import apikey_revoke

    apikey_revoke(key=world["key"], user=None)
    with pytest.raises(openai.AuthenticationError):
        oai(world).completions.create(model=NEW_MODEL, prompt="hi", max_tokens=2)


def test_it_limits_tokens_per_key(world: dict[str, Any]) -> None:
    _, secret = apikey_create(name="few-tokens", user=None, rpm=100, tpm=30)
    client = anth(world, key=secret)
    client.messages.create(model=NEW_MODEL, max_tokens=40, messages=MESSAGES)  # type: ignore[arg-type]
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model=NEW_MODEL, max_tokens=4, messages=MESSAGES)  # type: ignore[arg-type]
    assert (
        limited.value.response.headers["Retry-After"]
        and "30 tokens per minute" in limited.value.body["error"]["message"]
    )  # type: ignore[index]


def test_it_aborts_the_engine_request_when_the_client_disconnects(
    world: dict[str, Any], engines: dict[str, SimEngine]
) -> None:
    engine = engines[NEW_MODEL]
    before = engine.aborts()
    body = {
        "model": NEW_MODEL,
        "messages": MESSAGES,
        "max_tokens": 8000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream(
        "POST",
        f"{world['url']}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {world['secret']}"},
        timeout=30,
    ) as resp:
        assert resp.status_code == 200
        seen = 0
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                json.loads(line[6:])
                seen += 1
            if seen == 5:
                break  # leave mid-stream: the context manager closes the connection
    assert seen == 5
    wait_for(lambda: engine.aborts() > before, timeout=30)


def test_it_moves_to_the_next_cluster_when_an_engine_refuses_connections(
    world: dict[str, Any],
) -> None:
    dead = serve(
        NEW_MODEL, SimEngine(NEW_MODEL, free_port()), version="0.33.0", name="aa-dead"
    )
    # Same load on both, so "aa-dead" (first by name) is tried first and refuses.
    reply = oai(world).completions.create(model=NEW_MODEL, prompt="hi", max_tokens=3)
    assert reply.choices[0].text and reply.usage is not None
    Node.objects.filter(cluster=world["new"]).update(
        api_port=free_port()
    )  # both dead now
    with pytest.raises(openai.APIStatusError) as failed:
        oai(world).completions.create(model=NEW_MODEL, prompt="hi", max_tokens=3)
    assert failed.value.status_code == 502 and "aa-dead" in failed.value.body["message"]  # type: ignore[index]
    assert dead.name in failed.value.body["message"]  # type: ignore[index]
    # each refusal was counted for alerting (the "gateway sees engine errors" rule)
    import redis
    from django.conf import settings

    from console.gateway.upstream_errors import upstream_errors_total

    totals = upstream_errors_total(redis.Redis.from_url(str(settings.REDIS_URL)))
    assert totals.get(dead.pk, 0) >= 2 and totals.get(world["new"].pk, 0) >= 1
