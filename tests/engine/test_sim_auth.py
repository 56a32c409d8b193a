"""The sim engine guards its API like vLLM's AuthenticationMiddleware: /v1/* needs the key
(from --api-key, else VLLM_API_KEY); /health and /metrics stay open."""

from __future__ import annotations

import httpx
import pytest

from tests.simengine import sim_engine

pytestmark = pytest.mark.integration


def test_it_requires_the_key_on_v1_only() -> None:
    with sim_engine("auth-model", extra_env={"VLLM_API_KEY": "k-right"}) as engine:
        url = engine.url
        for headers in (
            {},
            {"Authorization": "Bearer k-wrong"},
            {"Authorization": "k-right"},
        ):
            answer = httpx.get(f"{url}/v1/models", headers=headers, timeout=5)
            assert answer.status_code == 401 and answer.json() == {
                "error": "Unauthorized"
            }
        body = {"model": "auth-model", "prompt": "hi", "max_tokens": 2}
        assert (
            httpx.post(f"{url}/v1/completions", json=body, timeout=5).status_code == 401
        )
        good = {"Authorization": "Bearer k-right"}
        assert httpx.get(f"{url}/v1/models", headers=good, timeout=5).status_code == 200
        assert (
            httpx.post(
                f"{url}/v1/completions", json=body, headers=good, timeout=30
            ).status_code
            == 200
        )
        # vLLM leaves these open: the scraper and the agent's probe need no key
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
        assert httpx.get(f"{url}/metrics", timeout=5).status_code == 200
        assert httpx.options(f"{url}/v1/models", timeout=5).status_code != 401


def test_it_is_open_without_a_key() -> None:
    with sim_engine("open-model") as engine:
        assert httpx.get(f"{engine.url}/v1/models", timeout=5).status_code == 200


def test_the_api_key_flag_wins_over_the_variable() -> None:
    import os

    from engine.sim.vllm.cli import parse_serve_args

    os.environ["VLLM_API_KEY"] = "from-env"
    try:
        assert parse_serve_args(["/m", "--api-key", "a", "b"], "0.33.0").api_keys == (
            "a",
            "b",
        )
        assert parse_serve_args(["/m"], "0.33.0").api_keys == ("from-env",)
    finally:
        del os.environ["VLLM_API_KEY"]
    assert parse_serve_args(["/m"], "0.33.0").api_keys == ()
