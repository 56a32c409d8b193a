"""The verify-weights runbook reads each node's answer from the broker's result store:
an answer of a shape node.weights_sha256 never sends fails that node's row with what it
was, and the operation goes on to its compare step (it used to stop on a TypeError)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from console.models import Cluster, Operation, StepState
from console.services.runbooks import weights as weights_runbook
from console.services.runbooks.base import Run
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db

GOOD = {
    "exists": True,
    "files": {"config.json": 30, "model.safetensors": 10},
    "sha256": {"config.json": "a" * 64, "model.safetensors": "b" * 64},
    "progress": {"total": 40, "cached": 0, "bytes_read": 40},
}


def _take(answer: Any) -> tuple[Any, list[str], dict[str, Any]]:
    cluster = Cluster.objects.filter(name="wans").first() or make_cluster("wans", 2)
    Operation.objects.filter(cluster=cluster).update(finished_at=timezone.now())
    op = Operation.objects.create(
        cluster=cluster,
        kind="verify_weights",
        state="running",
        started_at=timezone.now(),
    )
    run = Run(op)
    rows = weights_runbook.weights_rows(run)
    name = next(iter(rows["nodes"]))
    row = rows["nodes"][name]
    run.begin(row)
    failed: list[str] = []
    manifests: dict[str, Any] = {}
    weights_runbook._take(run, row, name, answer, manifests, failed, "/models/x")
    row.refresh_from_db()
    return row, failed, manifests


@pytest.mark.parametrize(
    "answer",
    [
        "ok",
        ["exists", True],
        None,
        {"exists": True},  # no files, no digests
        {**GOOD, "sha256": ["a" * 64]},
        {**GOOD, "files": {1: 30}},
        {**GOOD, "progress": "done"},
        {**GOOD, "sha256": {"config.json": 5, "model.safetensors": "b" * 64}},
        {**GOOD, "files": {"config.json": "30"}},
        {**GOOD, "progress": {"total": "40"}},
    ],
)
def test_an_answer_of_another_shape_fails_the_nodes_row_naming_it(answer: Any) -> None:
    row, failed, manifests = _take(answer)
    assert row.state == StepState.FAILED
    assert "not a hash manifest" in row.summary, row.summary
    assert failed and not manifests


def test_a_manifest_and_a_missing_directory_are_still_read() -> None:
    row, failed, manifests = _take(GOOD)
    assert row.state == StepState.SUCCEEDED, row.summary
    assert not failed and list(manifests.values()) == [GOOD]
    row, failed, _ = _take({"exists": False, "files": {}})
    assert row.state == StepState.FAILED and failed
    assert "/models/x" in row.summary
