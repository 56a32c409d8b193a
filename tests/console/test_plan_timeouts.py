"""`manage.py plan` shows the timeouts the plan sets, refuses disagreeing ones, prints warnings."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db


def _plan(*args: str) -> str:
    out = io.StringIO()
    call_command("plan", *args, stdout=out)
    return out.getvalue()


def test_it_prints_the_timeouts_it_sets(cluster: Any) -> None:
    out = _plan("qwen35-prod")
    assert "HCCL_CONNECT_TIMEOUT=600" in out
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=3000" in out and "warning:" not in out


def test_it_refuses_timeouts_that_disagree_and_warns_on_risky_ones(
    cluster: Any,
) -> None:
    profile = cluster.profile
    profile.extra_env = {"HCCL_EXEC_TIMEOUT": "3600"}
    profile.save()
    with pytest.raises(CommandError, match="VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"):
        _plan("qwen35-prod")
    profile.extra_env = {"HCCL_EXEC_TIMEOUT": "0"}
    profile.save()
    assert "warning: HCCL_EXEC_TIMEOUT=0 disables" in _plan("qwen35-prod")
