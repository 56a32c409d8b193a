"""Issue 18: the profile form (admin) offers only the vllm-ascend releases the matrix
knows; any other version is an override with a reason, audited."""

from __future__ import annotations

from typing import Any

import pytest

from console.admin import EngineProfileForm
from console.models import AuditEvent, EngineProfile
from engine import compat
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _post_data(profile: EngineProfile, **changes: Any) -> dict[str, Any]:
    """What the admin change form would post for ``profile`` unchanged, plus ``changes``."""
    form = EngineProfileForm(instance=profile)
    data: dict[str, Any] = {}
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue
        data[name] = "on" if value is True else value
    data.update(changes)
    return data


def _change(admin: Any, profile: EngineProfile, **changes: Any) -> Any:
    return login(admin).post(
        f"/admin/console/engineprofile/{profile.pk}/change/",
        _post_data(profile, **changes),
    )


def test_the_version_field_offers_the_matrix_releases_only(cluster: Any) -> None:
    field = EngineProfileForm(instance=cluster.profile).fields["vllm_ascend_version"]
    offered = [value for value, _ in field.choices if value]
    assert offered == list(compat.releases())
    form = EngineProfileForm(
        _post_data(cluster.profile, vllm_ascend_version="9.9.9"),
        instance=cluster.profile,
    )
    assert not form.is_valid() and "vllm_ascend_version" in form.errors


def test_an_override_needs_a_reason_and_is_audited(cluster: Any, admin: Any) -> None:
    profile = cluster.profile
    page = _change(admin, profile, override_version="0.99.0rc9+site")
    assert page.status_code == 200  # the form again, with the error
    assert "Say why 0.99.0rc9+site is used" in page.content.decode()
    profile.refresh_from_db()
    assert profile.vllm_ascend_version != "0.99.0rc9+site"
    assert not AuditEvent.objects.filter(action="profile.version_override").exists()

    page = _change(
        admin,
        profile,
        override_version="0.99.0rc9+site",
        override_reason="vendor hotfix build for HCCL timeouts",
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    profile.refresh_from_db()
    assert profile.vllm_ascend_version == "0.99.0rc9+site"
    event = AuditEvent.objects.get(action="profile.version_override")
    assert event.after["reason"] == "vendor hotfix build for HCCL timeouts"
    # the next edit shows the override where it was typed, not as a blank release
    assert (
        EngineProfileForm(instance=profile).initial["override_version"]
        == "0.99.0rc9+site"
    )


def test_a_matrix_release_saves_without_an_override(cluster: Any, admin: Any) -> None:
    release = list(compat.releases())[1]
    page = _change(admin, cluster.profile, vllm_ascend_version=release)
    assert page.status_code == 302, page.content.decode()[:2000]
    cluster.profile.refresh_from_db()
    assert cluster.profile.vllm_ascend_version == release
    assert not AuditEvent.objects.filter(action="profile.version_override").exists()
