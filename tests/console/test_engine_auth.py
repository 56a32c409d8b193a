"""Each cluster's engine has an API key: from ENGINE_API_KEY or derived per cluster; it goes
to the head in the start message as VLLM_API_KEY, never into the plan viewers see."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from console.engine_auth import engine_api_key, engine_headers, with_engine_key
from console.services.plans import cluster_plan

pytestmark = pytest.mark.django_db


def test_it_derives_a_stable_key_per_cluster() -> None:
    a, b = engine_api_key("qwen35-prod"), engine_api_key("qwen35-standby")
    assert a and b and a != b and len(a) >= 40
    assert engine_api_key("qwen35-prod") == a
    with override_settings(SECRET_KEY="another-secret-key-" + "x" * 40):
        assert engine_api_key("qwen35-prod") != a
    assert engine_headers("qwen35-prod") == {"Authorization": f"Bearer {a}"}


@override_settings(ENGINE_API_KEY="from-the-secret-store")
def test_a_configured_key_serves_every_cluster() -> None:
    assert engine_api_key("qwen35-prod") == "from-the-secret-store"
    assert engine_api_key("other") == "from-the-secret-store"


def test_only_the_start_message_of_the_head_carries_it(cluster: Any) -> None:
    plan = cluster_plan(cluster)
    key = engine_api_key(cluster.name)
    for node in plan.nodes:
        assert "VLLM_API_KEY" not in node.env
        sent = with_engine_key(cluster.name, node.to_dict())
        if node.role == "head":
            assert sent["env"]["VLLM_API_KEY"] == key
            assert "--api-key" not in sent["argv"]  # argv is world-readable in /proc
        else:
            assert "VLLM_API_KEY" not in sent["env"]
    out = io.StringIO()
    call_command("plan", cluster.name, "--json", stdout=out)
    assert key not in out.getvalue()
    call_command("plan", cluster.name, "--shell", stdout=out)
    assert key not in out.getvalue()
