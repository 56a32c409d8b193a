"""The cluster page's launch plan hides credentials below admin."""

from __future__ import annotations

from typing import Any

import pytest

from console.views.launchplan import MASK, _mask_argv, launch_plan

pytestmark = pytest.mark.django_db


def test_it_masks_the_engine_key_in_argv() -> None:
    argv = [
        "vllm",
        "serve",
        "/m",
        "--api-key",
        "sk-1",
        "--port",
        "8000",
        "--api-key=sk-2",
    ]
    assert _mask_argv(argv) == [
        "vllm",
        "serve",
        "/m",
        "--api-key",
        MASK,
        "--port",
        "8000",
        f"--api-key={MASK}",
    ]


def test_it_masks_secret_env_for_viewers_only(cluster: Any) -> None:
    profile = cluster.profile
    profile.extra_env = {"HF_TOKEN": "hf-secret", "OMP_NUM_THREADS": "10"}
    profile.save()
    viewer_plan = launch_plan(cluster, admin=False)
    env = dict(viewer_plan["nodes"][0]["env"])
    assert env["HF_TOKEN"] == MASK and env["OMP_NUM_THREADS"] == "10"
    assert "hf-secret" not in str(viewer_plan)
    admin_env = dict(launch_plan(cluster, admin=True)["nodes"][0]["env"])
    assert admin_env["HF_TOKEN"] == "hf-secret"
    assert [n["rank"] for n in viewer_plan["nodes"]] == sorted(
        n["rank"] for n in viewer_plan["nodes"]
    )
