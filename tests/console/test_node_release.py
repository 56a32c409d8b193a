"""Node page data: driver, image, versions against the matrix, model-file checks."""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone

from console.models import Node, Operation, OperationState
from console.models.operations import OperationStep
from console.selectors import node_release_status


def test_it_shows_the_image_versions_needed_and_the_last_checks(cluster: Any) -> None:
    Node.objects.filter(name="ascend-02").update(driver=Node.Driver.CONTAINER)
    node = Node.objects.get(name="ascend-02")
    empty = node_release_status(node)
    assert (
        empty["checks"] == [] and empty["image"] == "quay.io/ascend/vllm-ascend:v0.23.0"
    )
    op = Operation.objects.create(
        cluster=cluster,
        kind="preflight",
        state=OperationState.FAILED,
        finished_at=timezone.now(),
    )
    OperationStep.objects.create(
        operation=op,
        seq=1,
        name="Preflight checks on ascend-02",
        node=node,
        finished_at=timezone.now(),
        data={
            "checks": [
                {
                    "name": "npu health",
                    "status": "pass",
                    "evidence": "16 chips OK",
                    "fix": "",
                },
                {
                    "name": "release matrix",
                    "status": "fail",
                    "evidence": "torch_npu 2.9.0 (vllm-ascend 0.23.0 needs 2.10.0.post4)",
                    "fix": "Install …",
                },
            ]
        },
    )
    status = node_release_status(node)
    assert status["needed"]["torch_npu"] == "2.10.0.post4"
    assert [c["name"] for c in status["checks"]] == ["release matrix"]
    html = render_to_string("console/partials/_node_release.html", {"release": status})
    assert "quay.io/ascend/vllm-ascend:v0.23.0" in html
    assert "torch_npu 2.9.0 (vllm-ascend 0.23.0 needs 2.10.0.post4)" in html
    assert 'data-driver="container"' in html and "CANN 9.1.0" in html
