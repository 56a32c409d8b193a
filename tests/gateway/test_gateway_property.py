"""Property-based: whatever a client sends to /v1 — any JSON, any bytes, wrong types,
NUL bytes, deep nesting, any key — the gateway answers below 500 (run it on
PostgreSQL too: ``DATABASE_URL=postgres://… pytest tests/gateway/test_gateway_property.py``).

Requests go through Django's test client to the same handlers the ASGI app serves.
The models' clusters point at a port nobody listens on, so a request that passes
every check ends in the gateway's own 502 for an unreachable engine: the one 5xx
accepted here, and only with that answer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.gateway.services import apikey_create
from console.models import ClusterState, Node
from tests.factories import free_port, make_cluster, make_profile

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/models",
]
text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["prop-m", "prop-old", "\x00", "prop-m\x00", "", " " * 3]
)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3)
    ),
    max_leaves=12,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "x"]) | values},
        optional={"content": text | values},
    ),
    max_size=3,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["prop-m", "prop-old", "nobody"]) | text | values,
        "messages": messages | values,
        "prompt": text | values,
        "system": text | values,
        "max_tokens": st.integers(-5, 10**7) | values,
        "max_completion_tokens": st.integers(-5, 10**7) | values,
        "n": st.integers(-2, 50) | values,
        "stream": st.booleans() | values,
        "stream_options": st.just({"include_usage": True}) | values,
    },
)
payloads = (
    bodies.map(lambda b: json.dumps(b).encode())
    | values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=40)
    | st.integers(1, 6000).map(lambda d: b"[" * d + b"]" * d)
    | st.integers(1, 6000).map(
        lambda d: b'{"model": "prop-m", "messages": ' + b"[" * d + b"]" * d + b"}"
    )
)


@pytest.fixture
def secret() -> str:
    for name, version in (("prop-m", "0.33.0"), ("prop-old", "0.10.2")):
        profile = make_profile(
            name=f"{name} profile", served_model_name=name, vllm_version=version
        )
        cluster = make_cluster(name=f"{name}-c", nodes=1, profile=profile)
        Node.objects.filter(cluster=cluster).update(
            management_ip="127.0.0.1", api_port=free_port()
        )
        cluster.state = ClusterState.RUNNING
        cluster.save(update_fields=["state"])
    return apikey_create(name="prop", user=None, rpm=10**6, tpm=10**9)[1]


def test_no_input_makes_the_gateway_fail(secret: str) -> None:
    client = Client()

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        path=st.sampled_from(PATHS),
        payload=payloads,
        auth=st.sampled_from(["bearer", "x-api-key", "none", "junk"]),
        method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT"]),
    )
    def check(path: str, payload: bytes, auth: str, method: str) -> None:
        headers: dict[str, Any] = {}
        if auth == "bearer":
            headers["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
        elif auth == "x-api-key":
            headers["HTTP_X_API_KEY"] = secret
        elif auth == "junk":
            headers["HTTP_AUTHORIZATION"] = "Bearer \x7f\x01junk"
        resp = client.generic(
            method, path, payload, content_type="application/json", **headers
        )
        assert resp.status_code < 500 or resp.status_code == 502, (
            path,
            payload[:200],
            resp.status_code,
            resp.content[:300],
        )
        if resp.status_code == 502:
            assert b"accepted the connection" in resp.content  # the dead engine

    check()


def test_redis_out_of_reach_gets_503_with_retry_after(secret: str) -> None:
    from django.test import override_settings

    from tests.factories import free_port as closed_port

    with override_settings(REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0"):
        resp = Client().post(
            "/v1/chat/completions",
            {"model": "prop-m", "messages": [{"role": "user", "content": "hi"}]},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {secret}",
        )
    assert resp.status_code == 503 and resp["Retry-After"] == "5"
    assert "rate limiter is unreachable" in resp.json()["error"]["message"]
