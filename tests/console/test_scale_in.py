"""Scale-in is manual: the cluster page shows the model's gateway pool and stops a member on request."""

from __future__ import annotations

import re
from typing import Any

import pytest

from console.models import AuditEvent, Cluster, ClusterState, Operation
from tests.conftest import login


def pool_forms(body: str) -> dict[str, str]:
    """{action URL: reason} of every scale-in form on the page, as the browser would post it."""
    forms = re.findall(
        r'<form method="post" action="([^"]+)" class="scale-in-form">(.*?)</form>',
        body,
        re.S,
    )
    return {
        action: re.search(r'name="reason" value="([^"]*)"', inner).group(1)  # type: ignore[union-attr]
        for action, inner in forms
    }


@pytest.mark.django_db
def test_the_pool_card_lists_both_clusters_and_offers_scale_in_only_with_two_serving(
    cluster: Cluster, operator: Any, viewer: Any
) -> None:
    standby = Cluster.objects.get(name="qwen35-standby")
    assert standby.profile.served_model_name == cluster.profile.served_model_name
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    page = login(operator).get("/clusters/qwen35-prod/", HTTP_ACCEPT_LANGUAGE="en")
    body = page.content.decode()
    assert 'id="serving-pool"' in body
    assert 'data-pool-member="qwen35-prod"' in body
    assert 'data-pool-member="qwen35-standby"' in body
    assert pool_forms(body) == {}  # one serving cluster: stopping it is not a scale-in

    Cluster.objects.filter(pk=standby.pk).update(state=ClusterState.RUNNING)
    body = login(operator).get("/clusters/qwen35-prod/").content.decode()
    forms = pool_forms(body)
    assert set(forms) == {
        "/clusters/qwen35-prod/operations/",
        "/clusters/qwen35-standby/operations/",
    }
    viewer_body = login(viewer).get("/clusters/qwen35-prod/").content.decode()
    assert 'id="serving-pool"' in viewer_body and pool_forms(viewer_body) == {}


@pytest.mark.django_db
def test_scaling_in_stops_the_standby_with_the_reason_audited(
    cluster: Cluster, operator: Any
) -> None:
    Cluster.objects.filter(name__in=["qwen35-prod", "qwen35-standby"]).update(
        state=ClusterState.RUNNING
    )
    client = login(operator)
    body = client.get(
        "/clusters/qwen35-prod/", HTTP_ACCEPT_LANGUAGE="en"
    ).content.decode()
    action = "/clusters/qwen35-standby/operations/"
    reason = pool_forms(body)[action]
    assert "qwen35-prod" in reason and cluster.profile.served_model_name in reason
    answer = client.post(action, {"kind": "stop", "reason": reason})
    op = Operation.objects.get(cluster__name="qwen35-standby")
    assert answer.status_code == 302 and answer["Location"] == f"/operations/{op.pk}/"
    assert op.kind == "stop" and op.reason == reason and op.requested_by == operator
    assert not Operation.objects.filter(cluster=cluster).exists()  # prod keeps serving
    audit = AuditEvent.objects.get(action="operation.stop", actor=operator)
    assert (
        "qwen35-standby" in audit.target_repr
        and audit.result == AuditEvent.Result.SUCCESS
    )
