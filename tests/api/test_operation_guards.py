"""Guards around operations that hold without any worker: start on a serving cluster,
restart with link modes, and interrupted operations noticed when someone looks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from console.models import Cluster, ClusterState, Operation
from tests.conftest import login

pytestmark = pytest.mark.django_db


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_start_on_a_serving_cluster_is_refused_naming_restart(
    cluster: Cluster, operator: Any
) -> None:
    for state in (ClusterState.RUNNING, ClusterState.DEGRADED):
        Cluster.objects.filter(pk=cluster.pk).update(state=state)
        answer = api(operator).post(
            f"/api/clusters/{cluster.name}/operations/",
            {"kind": "start"},
            format="json",
            HTTP_ACCEPT_LANGUAGE="en",
        )
        assert answer.status_code == 400, answer.content
        assert list(answer.json()) == ["kind"] and "restart" in answer.json()["kind"][0]
    assert not Operation.objects.exists()  # nothing queued, nothing half-applied


def test_a_restart_may_move_the_engine_to_roce_but_only_every_rank_at_once(
    cluster: Cluster, operator: Any
) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    mixed = api(operator).post(
        f"/api/clusters/{cluster.name}/operations/",
        {"kind": "restart", "link_modes": {"ascend-03": "roce"}, "reason": "cable"},
        format="json",
    )
    assert mixed.status_code == 400, mixed.content
    assert "same link mode" in mixed.json()["link_modes"][0]
    assert "is_hierarchical_communication_enabled" in mixed.json()["link_modes"][0]
    assert not Operation.objects.exists()
    every = {n.name: "roce" for n in cluster.ranked_nodes()}
    body = {"kind": "restart", "link_modes": every, "reason": "cable"}
    answer = api(operator).post(
        f"/api/clusters/{cluster.name}/operations/", body, format="json"
    )
    assert answer.status_code == 201, answer.content
    op = Operation.objects.get(pk=answer.json()["id"])
    assert op.kind == "restart" and op.params["link_modes"] == every
    stop = api(operator).post(
        f"/api/clusters/{cluster.name}/operations/",
        {"kind": "stop", "link_modes": {"ascend-03": "roce"}},
        format="json",
    )
    assert stop.status_code == 400 and "link_modes" in stop.json()


def test_an_operation_whose_worker_died_reads_interrupted_without_a_beat(
    cluster: Cluster, viewer: Any, settings: Any
) -> None:
    """The beat's reaper runs on the control worker; when that worker is the one that
    died, whoever opens the operation still sees the truth."""
    settings.OPERATION_STALE_S = 30
    long_ago = timezone.now() - timedelta(seconds=120)

    def dead_operation() -> Operation:
        return Operation.objects.create(
            cluster=cluster,
            kind="start",
            state="running",
            started_at=long_ago,
            heartbeat_at=long_ago,
        )

    op = dead_operation()
    page = login(viewer).get(f"/operations/{op.pk}/")
    assert page.status_code == 200
    op.refresh_from_db()
    assert op.state == "interrupted" and op.finished_at is not None
    op = dead_operation()
    detail = api(viewer).get(f"/api/operations/{op.pk}/")
    assert detail.status_code == 200 and detail.json()["state"] == "interrupted"
