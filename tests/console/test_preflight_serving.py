"""Preflight on a serving cluster is refused (its own engines would read as faults)."""

from __future__ import annotations

from typing import Any

import pytest

from console.models import ClusterState, Operation
from console.services.operations import OperationRefused, operation_start
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("state", [ClusterState.RUNNING, ClusterState.DEGRADED])
def test_it_refuses_preflight_while_the_cluster_serves(
    cluster: Any, admin: Any, state: str
) -> None:
    cluster.state = state
    cluster.save(update_fields=["state"])
    with pytest.raises(OperationRefused) as exc:
        operation_start(cluster=cluster, kind="preflight", user=admin)
    assert exc.value.field == "kind" and "own engines" in str(exc.value)
    assert not Operation.objects.filter(cluster=cluster).exists()


def test_the_cluster_page_says_why_and_starts_nothing(
    cluster: Any, operator: Any
) -> None:
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    response = login(operator).post(
        f"/clusters/{cluster.name}/operations/",
        {"kind": "preflight"},
        follow=True,
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert "own engines" in response.content.decode()
    assert not Operation.objects.filter(cluster=cluster).exists()
