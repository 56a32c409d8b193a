"""Pages need a login; roles gate what a user may do; liveness is public."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from console.models import AuditEvent
from tests.conftest import login


@pytest.mark.django_db
def test_it_redirects_anonymous_users_to_login(cluster: Any) -> None:
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/")


@pytest.mark.django_db
def test_it_shows_clusters_and_nodes_to_a_viewer(cluster: Any, viewer: Any) -> None:
    response = login(viewer).get("/", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 200
    body = response.content.decode()
    for name in (
        "qwen35-prod",
        "qwen35-standby",
        "ascend-01",
        "ascend-04",
        "ascend-07",
        "Idle spares",
    ):
        assert name in body
    assert "rank 3" in body


@pytest.mark.django_db
def test_it_refuses_a_user_without_a_role(cluster: Any, norole: Any) -> None:
    assert login(norole).get("/").status_code == 403


@pytest.mark.django_db
def test_it_serves_chinese_by_default_and_switches_language(
    cluster: Any, viewer: Any
) -> None:
    client = login(viewer)
    body = client.get("/").content.decode()
    assert "集群" in body and 'lang="zh-hans"' in body
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert response.status_code == 302
    body = client.get("/").content.decode()
    assert 'lang="en"' in body and "Clusters" in body


@pytest.mark.django_db
def test_it_logs_in_with_a_password() -> None:
    from tests.factories import make_user

    make_user("olga", "operator")
    client = Client()
    bad = client.post(
        "/accounts/login/",
        {"username": "olga", "password": "wrong"},
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert (
        bad.status_code == 200 and "Wrong username or password" in bad.content.decode()
    )
    good = client.post("/accounts/login/", {"username": "olga", "password": "pw-olga"})
    assert good.status_code == 302 and good["Location"] == "/"


@pytest.mark.django_db
def test_it_enforces_csrf_on_login() -> None:
    client = Client(enforce_csrf_checks=True)
    assert (
        client.post("/accounts/login/", {"username": "x", "password": "y"}).status_code
        == 403
    )


@pytest.mark.django_db
def test_it_answers_healthz_without_login() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    data = response.json()
    assert data["checks"]["database"]["ok"] is True
    assert data["checks"]["redis"]["ok"] is True


@pytest.mark.django_db
def test_it_answers_503_when_redis_is_down() -> None:
    from console.embedded_redis import free_port

    with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
        response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["redis"]["ok"] is False


@pytest.mark.django_db
def test_it_tells_anonymous_callers_only_ok_or_not(caplog: Any) -> None:
    from console.embedded_redis import free_port

    port = free_port()
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{port}/0"):
        response = Client().get("/healthz")
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": {"ok": True}, "redis": {"ok": False}},
    }
    assert str(port) not in response.content.decode()
    assert any(
        str(port) in r.getMessage() for r in caplog.records
    )  # the on-call's detail


@pytest.mark.django_db
def test_it_keeps_the_admin_for_admins(
    cluster: Any, viewer: Any, operator: Any, admin: Any
) -> None:
    assert login(viewer).get("/admin/").status_code == 302  # not staff → admin login
    assert login(operator).get("/admin/console/node/").status_code == 302
    assert login(admin).get("/admin/console/node/").status_code == 200
    assert login(admin).get("/admin/console/auditevent/").status_code == 200


@pytest.mark.django_db
def test_it_audits_an_admin_change_with_before_and_after(
    cluster: Any, admin: Any
) -> None:
    from console.models import Node

    node = Node.objects.get(name="ascend-02")
    client = login(admin)
    page = client.get(f"/admin/console/node/{node.pk}/change/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None}
    data.update(
        {
            "hostname": "ascend-02.renamed",
            "npu_ips": '["127.10.2.1","127.10.2.2","127.10.2.3","127.10.2.4","127.10.2.5","127.10.2.6","127.10.2.7","127.10.2.8"]',
            "cluster": node.cluster_id,
            "link_mode_since": "",
            "last_seen_at": "",
        }
    )
    response = client.post(
        f"/admin/console/node/{node.pk}/change/", data, REMOTE_ADDR="127.0.0.9"
    )
    assert response.status_code == 302, (
        response.context["adminform"].form.errors if response.context else ""
    )
    event = AuditEvent.objects.get(action="node.update")
    assert event.actor_name == "ada" and event.source_ip == "127.0.0.9"
    assert (
        event.before["hostname"] == "ascend-02"
        and event.after["hostname"] == "ascend-02.renamed"
    )


@pytest.mark.django_db
def test_it_shows_admin_field_errors_for_bad_input(cluster: Any, admin: Any) -> None:
    client = login(admin)
    response = client.post(
        "/admin/console/node/add/",
        {
            "name": "Bad Name",
            "hostname": "x",
            "management_ip": "nope",
            "npu_count": 0,
            "role": "spare",
            "api_port": 1,
            "rpc_port": 2,
            "npu_ips": "[]",
            "nic_name": "eth0",
            "driver": "sim",
            "link_mode": "hccs",
            "state": "unknown",
            "server_model": "x",
            "npu_model": "y",
            "hbm_per_npu_gb": 64,
        },
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) >= {"name", "management_ip", "npu_count"}
    assert not AuditEvent.objects.filter(action="node.create").exists()


def client_for(user: Any) -> Client:
    return login(user)
