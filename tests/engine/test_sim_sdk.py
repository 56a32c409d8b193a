"""The official openai and anthropic SDKs against a real vLLM simulator process."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.engine.test_sim_vllm import (
    MODEL,
    SimProcess,
    free_port,
    serve_args,
    wait_health,
)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    proc = SimProcess(
        serve_args(port),
        tmp_path_factory.mktemp("sdk") / "head.log",
        {"SIM_TIME_SCALE": "0.02"},
    )
    try:
        wait_health(port, 200, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stop()


@pytest.fixture()
def oai(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="EMPTY", max_retries=0)


@pytest.fixture()
def claude(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="EMPTY", max_retries=0)


MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Describe the cluster."},
]


def test_it_answers_chat_completions(oai: openai.OpenAI) -> None:
    resp = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12)  # type: ignore[arg-type]
    choice = resp.choices[0]
    assert resp.object == "chat.completion" and resp.model == MODEL
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"
    assert resp.usage is not None and resp.usage.completion_tokens == 12
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 12


def test_it_streams_chat_with_a_usage_chunk(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=8,
        stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert (
        chunks[0].choices[0].delta.role == "assistant"
        and chunks[0].choices[0].delta.content == ""
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [
        c.choices[0].finish_reason
        for c in chunks
        if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 8
    full = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)  # type: ignore[arg-type]
    assert (
        content == full.choices[0].message.content
    )  # same prompt, same deterministic answer


def test_it_stops_at_a_stop_sequence(oai: openai.OpenAI) -> None:
    full = oai.completions.create(
        model=MODEL,
        prompt="Tell me about experts",
        max_tokens=40,
        extra_body={"ignore_eos": True},
    )
    words = full.choices[0].text.split()
    stop = " " + words[5]
    cut = oai.completions.create(
        model=MODEL,
        prompt="Tell me about experts",
        max_tokens=40,
        stop=[stop],
        extra_body={"ignore_eos": True},
    )
    assert cut.choices[0].finish_reason == "stop"
    assert stop not in cut.choices[0].text and full.choices[0].text.startswith(
        cut.choices[0].text
    )


def test_it_answers_completions_stream_and_not(oai: openai.OpenAI) -> None:
    resp = oai.completions.create(model=MODEL, prompt="The NPU cluster", max_tokens=6)
    assert (
        resp.object == "text_completion" and resp.choices[0].finish_reason == "length"
    )
    assert resp.usage is not None and resp.usage.completion_tokens == 6
    chunks = list(
        oai.completions.create(
            model=MODEL,
            prompt="The NPU cluster",
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert (
        "".join(c.choices[0].text for c in chunks if c.choices) == resp.choices[0].text
    )
    assert (
        chunks[-1].usage is not None
        and chunks[-1].usage.prompt_tokens == resp.usage.prompt_tokens
    )


def test_it_raises_not_found_for_an_unknown_model(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as exc:
        oai.chat.completions.create(model="nope", messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert "The model `nope` does not exist." in str(exc.value)


def test_it_answers_anthropic_messages(claude: anthropic.Anthropic) -> None:
    msg = claude.messages.create(
        model=MODEL,
        max_tokens=10,
        system="Be brief.",
        messages=[{"role": "user", "content": "Status?"}],
    )
    assert msg.type == "message" and msg.role == "assistant"
    assert msg.content[0].type == "text" and msg.content[0].text
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 10


def test_it_streams_anthropic_events_in_order(claude: anthropic.Anthropic) -> None:
    kinds: list[str] = []
    text = ""
    with claude.messages.stream(
        model=MODEL, max_tokens=6, messages=[{"role": "user", "content": "Status?"}]
    ) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
        final = stream.get_final_message()
    raw = [
        k for k in kinds if k != "text"
    ]  # the SDK adds derived "text" events and drops "ping"
    assert raw == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 6,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 6
    assert final.content[0].text == text  # type: ignore[union-attr]


def test_it_sends_the_ping_frame_after_content_block_start(base_url: str) -> None:
    with httpx.stream(
        "POST",
        f"{base_url}/v1/messages",
        json={
            "model": MODEL,
            "max_tokens": 2,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ) as resp:
        events = [line[7:] for line in resp.iter_lines() if line.startswith("event: ")]
    assert events == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_it_ends_anthropic_messages_with_end_turn_at_natural_stop(
    claude: anthropic.Anthropic,
) -> None:
    msg = claude.messages.create(
        model=MODEL, max_tokens=2000, messages=[{"role": "user", "content": "Short?"}]
    )
    assert msg.stop_reason == "end_turn" and msg.usage.output_tokens < 2000
