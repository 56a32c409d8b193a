"""The gateway sends each cluster's engine API key (console.engine_auth) upstream.

vLLM started with ``--api-key`` refuses /v1 requests without ``Authorization: Bearer
<key>``; the sim engine does not check keys, so a loopback HTTP server stands in for
the engine's front door here and records what arrives (the request is then answered
in vLLM's chat completion shape).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client

from console.gateway.services import apikey_create
from console.models import ClusterState, Node
from tests.factories import make_cluster, make_profile

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def door() -> Iterator[tuple[int, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": "keyed",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()


@pytest.mark.parametrize("key", ["engine-secret-1", None])
def test_the_engine_key_goes_upstream_as_a_bearer_token(
    door: tuple[int, list[dict[str, str]]], monkeypatch: Any, key: str | None
) -> None:
    port, seen = door
    monkeypatch.setattr(
        "console.gateway.routing.engine_api_key",
        lambda cluster: key if cluster == "keyed-c" else None,
    )
    profile = make_profile(
        name="keyed", served_model_name="keyed", vllm_version="0.33.0"
    )
    cluster = make_cluster(name="keyed-c", nodes=1, profile=profile)
    Node.objects.filter(cluster=cluster).update(
        management_ip="127.0.0.1", api_port=port
    )
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    _, secret = apikey_create(name="keyed-app", user=None)
    resp = Client().post(
        "/v1/chat/completions",
        {"model": "keyed", "messages": [{"role": "user", "content": "hi"}]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert resp.status_code == 200, resp.content
    assert len(seen) == 1
    if key:
        assert seen[0]["authorization"] == f"Bearer {key}"
    else:
        assert "authorization" not in seen[0]  # the client's gateway key never leaks
