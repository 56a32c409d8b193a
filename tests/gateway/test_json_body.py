"""The gateway's request-body parser (orjson): what the stdlib accepted and RFC 8259
does not is a 400 naming what is wrong, and a long prompt in any script reads the
same as the stdlib reads it."""

from __future__ import annotations

import json

import pytest

from console.gateway.admission import _json_body
from console.gateway.errors import GatewayError
from console.gateway.sse import sse_data, sse_frame


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"model": "m", "temperature": NaN}', "not valid JSON"),
        (b'{"model": "m", "max_tokens": 1e400}', "not valid JSON"),
        (b'{"model": "m", "prompt": "\\ud800"}', "not valid JSON"),
        (b'{"model": "m"} trailing', "not valid JSON"),
        (b'{"model": "m", "prompt": "\xff"}', "not UTF-8 JSON"),
        (b"[" * 2000 + b"]" * 2000, "nests too deeply"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
def test_a_body_outside_rfc_8259_is_a_400_saying_what_is_wrong(
    raw: bytes, says: str
) -> None:
    with pytest.raises(GatewayError) as err:
        _json_body(raw)
    assert err.value.status == 400
    assert says in err.value.message


def test_the_stdlib_and_the_gateway_read_a_long_prompt_alike() -> None:
    prompt = "请根据以下政务材料回答问题。" * 3000 + '\u2028 tab\t quote" é 😀'
    for ensure_ascii in (True, False):  # \\u escapes (Python clients) or raw UTF-8
        raw = json.dumps(
            {"model": "m", "prompt": prompt, "max_tokens": 8, "stream": True},
            ensure_ascii=ensure_ascii,
        ).encode()
        assert _json_body(raw) == json.loads(raw)


def test_usage_events_read_and_anthropic_frames_written_as_json() -> None:
    event = (
        b'data: {"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":9}}\n\n'
    )
    assert sse_data(event) == {
        "choices": [],
        "usage": {"prompt_tokens": 6, "completion_tokens": 9},
    }
    assert sse_data(b"data: [DONE]\n\n") == "[DONE]"
    assert sse_data(b"data: {broken\n\n") is None
    frame = sse_frame("content_block_delta", {"delta": {"text": "你好"}})
    head, data = frame.split(b"\n", 1)
    assert head == b"event: content_block_delta"
    assert json.loads(data.removeprefix(b"data: ")) == {"delta": {"text": "你好"}}
    assert frame.endswith(b"}\n\n")
