"""What the gateway sends on to the engine: the client's own bytes whenever they do,
one member added in front for the usage chunk of a stream (no re-encoding of a long
prompt), a re-encoded body only when the client's object cannot take the member; the
client's X-Request-ID when it is a plain token, a fresh unique one otherwise."""

from __future__ import annotations

import json
from typing import Any

import pytest

from console.gateway.errors import ANTHROPIC, OPENAI
from console.gateway.http import Request
from console.gateway.outbound import request_id, upstream_request

PATH = "/v1/chat/completions"


def _sent(raw: bytes, protocol: str = OPENAI) -> tuple[str, bytes, dict[str, Any]]:
    body = json.loads(raw)
    req = Request("POST", PATH, {}, raw)
    path, data = upstream_request(req, protocol, PATH, body, translated=False)
    return path, data, body


def test_a_stream_gets_include_usage_spliced_into_the_clients_own_bytes() -> None:
    # an escaped prompt stays byte for byte as the client sent it
    raw = b'  {"model":"m","stream":true,"messages":[{"role":"user","content":"\\u4f60"}]}'
    path, data, body = _sent(raw)
    assert path == PATH
    assert data.endswith(raw.lstrip()[1:])  # the client's members, untouched
    assert json.loads(data) == {**body, "stream_options": {"include_usage": True}}


@pytest.mark.parametrize(
    "options", [{"include_usage": False}, {}, {"continuous_usage_stats": True}]
)
def test_a_clients_own_stream_options_are_kept_with_include_usage_set(
    options: dict[str, Any],
) -> None:
    raw = json.dumps({"model": "m", "stream": True, "stream_options": options}).encode()
    _, data, _ = _sent(raw)
    assert json.loads(data)["stream_options"] == {**options, "include_usage": True}


def test_a_body_that_asks_for_usage_itself_goes_on_as_it_came() -> None:
    raw = b'{"model":"m","stream":true,"stream_options":{"include_usage":true}}'
    assert _sent(raw)[1] == raw


def test_a_body_not_in_utf8_is_re_encoded_not_spliced() -> None:
    # json.loads reads UTF-16 too (RFC 8259 detection); bytes spliced into it would
    # not be JSON
    raw = json.dumps({"model": "m", "stream": True}).encode("utf-16")
    _, data, body = _sent(raw)
    assert json.loads(data) == {**body, "stream_options": {"include_usage": True}}


@pytest.mark.parametrize("stream", [False, None])
def test_a_plain_request_goes_on_byte_for_byte(stream: bool | None) -> None:
    raw = b'{"model":"m","messages":[],"stream":%s}' % json.dumps(stream).encode()
    assert _sent(raw)[1] == raw
    assert _sent(raw, ANTHROPIC)[1] == raw


def test_request_ids_pass_when_plain_and_are_fresh_and_unique_otherwise() -> None:
    assert request_id("trace-42.a:b_c") == "trace-42.a:b_c"
    fresh = {request_id(bad) for bad in ("", "has space", "x" * 65, "é", "a\tb")}
    assert len(fresh) == 5
    assert all(len(i) == 32 and i.isalnum() for i in fresh)
