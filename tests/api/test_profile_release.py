"""A profile's vllm-ascend version comes from the release matrix; an admin override is audited."""

from __future__ import annotations

from typing import Any

from console.models import AuditEvent
from tests.api.test_rest import _profile_body
from tests.conftest import login


def test_it_refuses_a_version_the_matrix_does_not_know(
    cluster: Any, admin: Any
) -> None:
    c = login(admin)
    body = _profile_body(cluster, name="odd version", vllm_ascend_version="0.23.7")
    resp = c.post("/api/profiles/", body, content_type="application/json")
    assert resp.status_code == 400, resp.content
    msg = " ".join(resp.json()["vllm_ascend_version"])
    assert "0.23.7" in msg and "0.23.0rc1" in msg and "vllm_ascend_override" in msg
    assert not AuditEvent.objects.filter(action="profile.create").exists()


def test_it_accepts_a_known_version(cluster: Any, admin: Any) -> None:
    c = login(admin)
    body = _profile_body(cluster, name="rc", vllm_ascend_version="0.23.0rc1")
    resp = c.post("/api/profiles/", body, content_type="application/json")
    assert resp.status_code == 201, resp.content
    assert not AuditEvent.objects.filter(action="profile.version_override").exists()


def test_an_admin_override_is_audited(cluster: Any, admin: Any) -> None:
    c = login(admin)
    resp = c.patch(
        f"/api/profiles/{cluster.profile.pk}/",
        {"vllm_ascend_version": "0.24.0rc1", "vllm_ascend_override": True},
        content_type="application/json",
    )
    assert resp.status_code == 200, resp.content
    cluster.profile.refresh_from_db()
    assert cluster.profile.vllm_ascend_version == "0.24.0rc1"
    row = AuditEvent.objects.get(action="profile.version_override")
    assert row.after["vllm_ascend_version"] == "0.24.0rc1"
