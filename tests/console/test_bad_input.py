"""Bad input on pages and the API is a 400 naming the field, never a 500 (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("since", ["1e20", "inf", "nan", "-1e15", "-inf", "abc"])
def test_the_series_endpoint_refuses_a_since_that_is_no_time(
    cluster: Any, viewer: Any, since: str
) -> None:
    answer = login(viewer).get(
        f"/monitoring/clusters/{cluster.pk}/series", {"since": since}
    )
    assert answer.status_code == 400, answer.content
    assert "since" in answer.json()["error"]


def test_the_series_endpoint_takes_a_real_since(cluster: Any, viewer: Any) -> None:
    answer = login(viewer).get(
        f"/monitoring/clusters/{cluster.pk}/series", {"since": "1764700000.5"}
    )
    assert answer.status_code == 200


@pytest.mark.parametrize("since", ["2026-13-40T00:00:00", "2026-02-30T25:61:00"])
def test_the_audit_api_refuses_a_date_that_does_not_exist(
    admin: Any, since: str
) -> None:
    client = APIClient()
    client.force_authenticate(admin)
    answer = client.get("/api/audit/", {"since": since})
    assert answer.status_code == 400 and "since" in answer.json()


def test_a_5000_deep_json_body_on_the_api_is_a_400(cluster: Any, operator: Any) -> None:
    client = APIClient()
    client.force_authenticate(operator)
    body = "[" * 5000 + "]" * 5000
    answer = client.post(
        f"/api/clusters/{cluster.name}/operations/",
        body,
        content_type="application/json",
    )
    assert answer.status_code == 400, answer.content
    deep_nul = '{"a":' * 3000 + '"\\u0000"' + "}" * 3000
    answer = client.post(
        f"/api/clusters/{cluster.name}/operations/",
        deep_nul,
        content_type="application/json",
    )
    assert answer.status_code == 400, answer.content


@pytest.mark.parametrize(
    "path", ["/operations/", "/alerts/incidents/", "/alerts/", "/nodes/"]
)
def test_a_nul_in_a_page_query_string_is_a_400(
    cluster: Any, admin: Any, path: str
) -> None:
    answer = login(admin).get(path, {"cluster": "qwen\x00", "q": "a\x00b"})
    assert answer.status_code == 400
    assert "NUL" in answer.content.decode()


def test_a_nul_in_a_page_form_is_a_400(admin: Any) -> None:
    answer = Client().post(
        "/accounts/login/", {"username": "ad\x00min", "password": "x"}
    )
    assert answer.status_code == 400 and "username" in answer.content.decode()
