"""Issue 18: the profile form (admin) offers only the vllm-ascend releases the matrix
knows; any other version is an override with a reason, audited."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from console.admin import EngineProfileForm
from console.models import AuditEvent, EngineProfile
from console.services.plans import cluster_plan
from engine import compat
from engine.tuning import apply_tuning
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
        headers={"Accept-Language": "en"},
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


def test_the_form_offers_the_tutorial_tuning_options_with_their_reasons(
    cluster: Any, admin: Any
) -> None:
    page = login(admin).get(
        f"/admin/console/engineprofile/{cluster.profile.pk}/change/",
        headers={"Accept-Language": "en"},
    )
    html = page.content.decode()
    assert 'value="full_decode_graph"' in html and "FULL_DECODE_ONLY" in html
    assert "Replays full decode steps as ACL graphs" in html
    assert "Qwen3.5-397B-A17B.md" in html  # the source beside each
    page = _change(admin, cluster.profile, tuning=["fixed_seed", "full_decode_graph"])
    assert page.status_code == 302, page.content.decode()[:2000]
    cluster.profile.refresh_from_db()
    assert cluster.profile.tuning == ["fixed_seed", "full_decode_graph"]
    argv = cluster_plan(cluster).nodes[0].argv
    assert argv[argv.index("--seed") + 1] == "1024"
    assert '{"cudagraph_mode":"FULL_DECODE_ONLY"}' in argv


def test_a_tuning_option_the_version_or_the_extra_flags_refuse_is_named(
    cluster: Any, admin: Any
) -> None:
    profile = cluster.profile
    profile.extra_flags = ["--seed", "7"]
    profile.tuning = ["fixed_seed", "no_such_option"]
    with pytest.raises(ValidationError) as err:
        profile.full_clean()
    problems = err.value.message_dict["tuning"]
    assert any("fixed_seed: extra flags set --seed already" in p for p in problems)
    assert any("unknown tuning option 'no_such_option'" in p for p in problems)
    api = login(admin).patch(
        f"/api/profiles/{profile.pk}/",
        {"tuning": ["no_such_option"]},
        content_type="application/json",
    )
    assert api.status_code == 400 and "tuning" in api.json(), api.content


def test_a_multi_node_only_option_does_nothing_on_one_server() -> None:
    flags, fields = apply_tuning(["no_prefix_caching_multi_node"], nodes=1)
    assert (flags, fields) == ([], {})
    flags, fields = apply_tuning(["no_prefix_caching_multi_node"], nodes=4)
    assert fields == {"enable_prefix_caching": False}
