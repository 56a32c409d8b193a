"""The playground page: operators only; the picker lists clusters with their state."""

from __future__ import annotations

from typing import Any

import pytest

from console.models import ClusterState
from console.playground.services import chat_request
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_it_shows_the_page_to_operators_with_every_cluster_and_the_gateway_base(
    cluster: Any, operator: Any
) -> None:
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    response = login(operator).get("/playground/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="pg-cluster"' in body and f'value="{cluster.pk}"' in body
    assert 'data-gateway="http://testserver/v1"' in body
    assert 'href="/playground/"' in body  # the nav link


def test_it_refuses_viewers_and_sends_anonymous_users_to_login(
    viewer: Any, client: Any
) -> None:
    assert login(viewer).get("/playground/").status_code == 403
    assert 'href="/playground/"' not in login(viewer).get("/").content.decode()
    response = client.get("/playground/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_builds_a_streaming_request_with_usage() -> None:
    body = chat_request(
        model="m",
        data={
            "system": "S",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": "0.3",
            "top_p": "0.5",
            "max_tokens": "9",
            "stop": ["END"],
        },
    )
    assert body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "hi"},
        ],
        "temperature": 0.3,
        "top_p": 0.5,
        "max_tokens": 9,
        "stream": True,
        "stream_options": {"include_usage": True},
        "stop": ["END"],
    }
