"""REST admin API: read endpoints, operations list/cancel, audit (admin), tokens."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from console.models import AuditEvent, Operation, OperationState
from tests.conftest import login


def _op(
    cluster: Any, state: str = OperationState.QUEUED, kind: str = "start"
) -> Operation:
    finished = (
        None
        if state in (OperationState.QUEUED, OperationState.RUNNING)
        else timezone.now()
    )
    return Operation.objects.create(
        cluster=cluster, kind=kind, state=state, finished_at=finished
    )


def test_clusters_nodes_profiles_readable_by_viewer(cluster: Any, viewer: Any) -> None:
    c = login(viewer)
    body = c.get("/api/clusters/").json()
    names = [row["name"] for row in body["results"]]
    assert "qwen35-prod" in names
    detail = c.get("/api/clusters/qwen35-prod/").json()
    assert detail["profile"] == cluster.profile.name
    assert sorted(detail["nodes"]) == sorted(n.name for n in cluster.nodes.all())
    node = cluster.nodes.order_by("name").first()
    assert c.get(f"/api/nodes/{node.name}/").json()["cluster"] == "qwen35-prod"
    assert c.get(f"/api/profiles/{cluster.profile.pk}/").status_code == 200
    assert c.get("/api/clusters/nope/").status_code == 404
    assert c.delete("/api/clusters/qwen35-prod/").status_code == 403  # admin only


def test_anonymous_gets_401_or_403(cluster: Any) -> None:
    c = Client()
    for url in (
        "/api/clusters/",
        "/api/nodes/",
        "/api/profiles/",
        "/api/operations/",
        "/api/audit/",
    ):
        assert c.get(url).status_code in (401, 403), url


def test_operations_list_filters_and_validates(cluster: Any, viewer: Any) -> None:
    done = _op(cluster, OperationState.SUCCEEDED, "stop")
    queued = _op(cluster, OperationState.QUEUED, "start")
    c = login(viewer)
    ids = [
        r["id"] for r in c.get("/api/operations/?cluster=qwen35-prod").json()["results"]
    ]
    assert ids[:2] == [queued.pk, done.pk]
    ids = [r["id"] for r in c.get("/api/operations/?state=succeeded").json()["results"]]
    assert ids == [done.pk]
    ids = [r["id"] for r in c.get("/api/operations/?kind=start").json()["results"]]
    assert ids == [queued.pk]
    bad = c.get("/api/operations/?state=bogus")
    assert bad.status_code == 400 and "state" in bad.json()
    page = c.get("/api/operations/?limit=1").json()
    assert page["count"] == 2 and len(page["results"]) == 1 and page["next"]


def test_operation_cancel_roles_and_audit(
    cluster: Any, viewer: Any, operator: Any
) -> None:
    queued = _op(cluster)
    assert login(viewer).post(f"/api/operations/{queued.pk}/cancel/").status_code == 403
    resp = login(operator).post(f"/api/operations/{queued.pk}/cancel/")
    assert resp.status_code == 200 and resp.json()["state"] == "cancelled"
    assert AuditEvent.objects.filter(
        action="operation.cancel", target_id=str(queued.pk)
    ).exists()
    again = login(operator).post(f"/api/operations/{queued.pk}/cancel/")
    assert again.status_code == 409


def test_audit_admin_only_with_filters(
    cluster: Any, viewer: Any, operator: Any, admin: Any
) -> None:
    login(operator).post(f"/api/operations/{_op(cluster).pk}/cancel/")
    assert login(viewer).get("/api/audit/").status_code == 403
    assert login(operator).get("/api/audit/").status_code == 403
    c = login(admin)
    rows = c.get(f"/api/audit/?actor={operator.username}&action=operation.").json()[
        "results"
    ]
    assert rows and all(r["actor_name"] == operator.username for r in rows)
    assert any(r["action"] == "operation.cancel" for r in rows)
    assert c.get("/api/audit/?since=2999-01-01T00:00:00Z").json()["count"] == 0
    bad = c.get("/api/audit/?since=yesterday")
    assert bad.status_code == 400 and "since" in bad.json()


def test_token_me_rotate_use_revoke(cluster: Any, viewer: Any) -> None:
    assert Client().post("/api/tokens/me/").status_code in (401, 403)
    c = login(viewer)
    first = c.post("/api/tokens/me/").json()["token"]
    second = c.post("/api/tokens/me/").json()["token"]
    assert first != second
    scripted = Client()
    assert (
        scripted.get("/api/clusters/", HTTP_AUTHORIZATION=f"Token {first}").status_code
        == 401
    )
    assert (
        scripted.get("/api/clusters/", HTTP_AUTHORIZATION=f"Token {second}").status_code
        == 200
    )
    assert c.delete("/api/tokens/me/").status_code == 204
    assert c.delete("/api/tokens/me/").status_code == 404
    assert (
        scripted.get("/api/clusters/", HTTP_AUTHORIZATION=f"Token {second}").status_code
        == 401
    )
    actions = list(
        AuditEvent.objects.filter(actor_name=viewer.username).values_list(
            "action", flat=True
        )
    )
    assert {"token.create", "token.rotate", "token.revoke"} <= set(actions)


@pytest.mark.django_db
def test_token_command(viewer: Any) -> None:
    out = StringIO()
    call_command("token", "create", viewer.username, stdout=out, stderr=StringIO())
    key = out.getvalue().strip()
    assert Token.objects.get(user=viewer).key == key
    out2 = StringIO()
    call_command("token", "create", viewer.username, stdout=out2, stderr=StringIO())
    assert (
        out2.getvalue().strip() != key
        and Token.objects.filter(user=viewer).count() == 1
    )
    call_command("token", "revoke", viewer.username, stdout=StringIO())
    assert not Token.objects.filter(user=viewer).exists()
    with pytest.raises(CommandError, match="has no token"):
        call_command("token", "revoke", viewer.username, stdout=StringIO())
    with pytest.raises(CommandError, match="no user named"):
        call_command("token", "create", "ghost", stdout=StringIO())
    assert AuditEvent.objects.filter(
        action="token.revoke", actor_name="system"
    ).exists()


@pytest.mark.django_db
def test_schema_validates() -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_failover_needs_valid_link_modes(cluster: Any, operator: Any) -> None:
    c = login(operator)
    url = "/api/clusters/qwen35-prod/operations/"
    for body, field in (
        ({"kind": "failover"}, "link_modes"),
        ({"kind": "failover", "link_modes": {"ascend-01": "smoke"}}, "link_modes"),
        ({"kind": "failover", "link_modes": {"elsewhere": "roce"}}, "link_modes"),
        ({"kind": "start", "link_modes": {"ascend-01": "roce"}}, "link_modes"),
    ):
        resp = c.post(url, body, content_type="application/json")
        assert resp.status_code == 400 and field in resp.json(), (body, resp.content)
    assert not Operation.objects.filter(
        cluster=cluster
    ).exists()  # nothing half-applied


def test_cluster_delete_admin_conflicts_and_audit(cluster: Any, admin: Any) -> None:
    from console.models import Cluster

    c = login(admin)
    op = _op(cluster)
    resp = c.delete("/api/clusters/qwen35-prod/")
    assert resp.status_code == 409 and str(op.pk) in resp.json()["detail"]
    op.delete()
    resp = c.delete("/api/clusters/qwen35-prod/")  # still has member nodes (PROTECT)
    assert resp.status_code == 409 and "ascend-01" in resp.json()["detail"]
    Cluster.objects.create(name="empty", profile=cluster.profile)
    assert c.delete("/api/clusters/empty/").status_code == 204
    assert not Cluster.objects.filter(name="empty").exists()
    assert AuditEvent.objects.filter(
        action="cluster.delete", target_repr__contains="empty"
    ).exists()


# -- admin writes: clusters, nodes, profiles ---------------------------------------

WRITE_URLS = (
    ("post", "/api/profiles/"),
    ("patch", "/api/profiles/{profile}/"),
    ("delete", "/api/profiles/{profile}/"),
    ("post", "/api/clusters/"),
    ("patch", "/api/clusters/qwen35-prod/"),
    ("post", "/api/nodes/"),
    ("patch", "/api/nodes/ascend-02/"),
    ("delete", "/api/nodes/ascend-02/"),
)


def _profile_body(cluster: Any, **overrides: Any) -> dict[str, Any]:
    """The W8A8 demo profile (DP2 x TP8, fits two 8 x 64 GB servers) as a POST body."""
    from console.models import EngineProfile

    w8a8 = EngineProfile.objects.get(name__contains="W8A8")
    body = _profile_json(w8a8)
    return {**body, **overrides}


def _profile_json(profile: Any) -> dict[str, Any]:
    from console.api.serializers import EngineProfileSerializer

    data = dict(EngineProfileSerializer(profile).data)
    for key in ("id", "created_at", "updated_at"):
        data.pop(key)
    return data


def _node_body(name: str, rank: int, cluster: str, **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "hostname": name,
        "management_ip": f"10.9.0.{rank + 1}",
        "npu_ips": [f"10.90.{rank}.{i + 1}" for i in range(8)],
        "cluster": cluster,
        "rank": rank,
        "role": "head" if rank == 0 else "worker",
        "driver": "sim",
        **overrides,
    }


def test_it_refuses_writes_to_non_admins(
    cluster: Any, viewer: Any, operator: Any
) -> None:
    from console.models import Node

    urls = [(m, u.format(profile=cluster.profile_id)) for m, u in WRITE_URLS]
    for user in (viewer, operator):
        c = login(user)
        for method, url in urls:
            resp = getattr(c, method)(url, {}, content_type="application/json")
            assert resp.status_code == 403, (user.username, method, url)
    for method, url in urls:
        resp = getattr(Client(), method)(url, {}, content_type="application/json")
        assert resp.status_code == 401, (method, url)
    assert Node.objects.filter(name="ascend-02").exists()
    assert not AuditEvent.objects.filter(action__startswith="node.").exists()


def test_admin_creates_patches_and_deletes_inventory(cluster: Any, admin: Any) -> None:
    from console.models import Cluster, EngineProfile, Node

    c = login(admin)
    resp = c.post(
        "/api/profiles/",
        _profile_body(cluster, name="lab w8a8"),
        content_type="application/json",
    )
    assert resp.status_code == 201, resp.content
    profile_id = resp.json()["id"]
    resp = c.post(
        "/api/clusters/",
        {"name": "lab", "profile": "lab w8a8", "description": "two nodes"},
        content_type="application/json",
    )
    assert resp.status_code == 201, resp.content
    assert resp.json()["profile"] == "lab w8a8" and resp.json()["state"] == "stopped"
    for rank in (0, 1):
        resp = c.post(
            "/api/nodes/",
            _node_body(f"lab-{rank}", rank, "lab"),
            content_type="application/json",
        )
        assert resp.status_code == 201, resp.content
    assert [n.name for n in Cluster.objects.get(name="lab").ranked_nodes()] == [
        "lab-0",
        "lab-1",
    ]
    # a clash is refused naming the field, nothing saved
    resp = c.post(
        "/api/nodes/",
        _node_body("lab-x", 1, "lab", management_ip="10.9.0.9"),
        content_type="application/json",
    )
    assert resp.status_code == 400 and "rank" in resp.json(), resp.content
    assert not Node.objects.filter(name="lab-x").exists()

    resp = c.patch(
        "/api/nodes/lab-1/", {"hostname": "lab-1.dc"}, content_type="application/json"
    )
    assert resp.status_code == 200 and resp.json()["hostname"] == "lab-1.dc"
    event = AuditEvent.objects.get(action="node.update", target_repr__contains="lab-1")
    assert event.before["hostname"] == "lab-1" and event.after["hostname"] == "lab-1.dc"
    assert event.actor_name == admin.username
    resp = c.patch(
        "/api/clusters/lab/",
        {"description": "lab pair"},
        content_type="application/json",
    )
    assert resp.status_code == 200 and resp.json()["description"] == "lab pair"
    resp = c.patch(
        f"/api/profiles/{profile_id}/",
        {"max_num_seqs": 8},
        content_type="application/json",
    )
    assert resp.status_code == 200 and resp.json()["max_num_seqs"] == 8

    # deletes: 409 while an operation is active / the profile is in use
    lab = Cluster.objects.get(name="lab")
    op = _op(lab)
    resp = c.delete("/api/nodes/lab-1/")
    assert resp.status_code == 409 and str(op.pk) in resp.json()["detail"]
    assert Node.objects.filter(name="lab-1").exists()
    Operation.objects.filter(pk=op.pk).update(
        state=OperationState.SUCCEEDED, finished_at=timezone.now()
    )
    for name in ("lab-1", "lab-0"):
        assert c.delete(f"/api/nodes/{name}/").status_code == 204
    resp = c.delete(f"/api/profiles/{profile_id}/")
    assert resp.status_code == 409 and "lab" in resp.json()["detail"]
    assert c.delete("/api/clusters/lab/").status_code == 204
    assert c.delete(f"/api/profiles/{profile_id}/").status_code == 204
    assert not EngineProfile.objects.filter(pk=profile_id).exists()
    actions = set(
        AuditEvent.objects.filter(target_repr__startswith="lab").values_list(
            "action", flat=True
        )
    )
    assert {
        "profile.create",
        "profile.update",
        "profile.delete",
        "cluster.create",
        "cluster.update",
        "cluster.delete",
        "node.create",
        "node.update",
        "node.delete",
    } <= actions, actions
    created = AuditEvent.objects.get(action="profile.create")
    assert created.before is None and created.after["name"] == "lab w8a8"


def test_it_refuses_a_flag_removed_from_the_target_vllm(
    cluster: Any, admin: Any
) -> None:
    from console.models import EngineProfile

    c = login(admin)
    flags = ["--num-scheduler-steps", "8"]
    resp = c.post(
        "/api/profiles/",
        _profile_body(cluster, name="old flags", extra_flags=flags),
        content_type="application/json",
    )
    assert resp.status_code == 400, resp.content
    message = " ".join(resp.json()["extra_flags"])
    version = cluster.profile.vllm_version
    assert "--num-scheduler-steps" in message and version in message, message
    assert not EngineProfile.objects.filter(name="old flags").exists()
    # the same on PATCH of a profile a cluster uses: refused, nothing changed
    resp = c.patch(
        f"/api/profiles/{cluster.profile_id}/",
        {"extra_flags": flags, "max_num_seqs": 4},
        content_type="application/json",
    )
    assert resp.status_code == 400 and "extra_flags" in resp.json(), resp.content
    cluster.profile.refresh_from_db()
    assert cluster.profile.extra_flags == [] and cluster.profile.max_num_seqs == 16
    assert not AuditEvent.objects.filter(action="profile.update").exists()


def test_it_refuses_a_profile_that_does_not_fit(cluster: Any, admin: Any) -> None:
    from console.models import Cluster, EngineProfile
    from tests.factories import make_cluster, make_profile

    c = login(admin)
    body = _profile_body(
        cluster,
        name="bf16 on two",
        quantization="",
        weight_bits=16,
        model_path="/data/models/Qwen3.5-397B-A17B",
    )
    resp = c.post("/api/profiles/", body, content_type="application/json")
    assert resp.status_code == 400 and "GiB" in " ".join(resp.json()["memory"])
    assert not EngineProfile.objects.filter(name="bf16 on two").exists()
    # a 2-node cluster moved onto a BF16 DP2 profile: refused, profile unchanged
    small = make_cluster(
        "small", nodes=2, profile=EngineProfile.objects.get(name__contains="W8A8")
    )
    bf16 = make_profile(name="bf16 dp2", data_parallel_size=2)
    resp = c.patch(
        "/api/clusters/small/", {"profile": bf16.name}, content_type="application/json"
    )
    assert resp.status_code == 400, resp.content
    assert "small" in " ".join(resp.json()["memory"])
    assert Cluster.objects.get(pk=small.pk).profile.name != bf16.name
