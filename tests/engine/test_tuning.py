"""The vllm-ascend tutorial's tuning flags, offered as profile options checked against the flag lists."""

from __future__ import annotations

import dataclasses

import pytest

from engine.flags import SUPPORTED_VERSIONS
from engine.plans import build_plan
from engine.tuning import TUNING_OPTIONS, TuningOption, tuning_options
from tests.engine.test_plans import demo_nodes, demo_profile


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_every_option_passes_the_flag_list_of_each_version(version: str) -> None:
    options = tuning_options(version, nodes=4)
    assert {o["key"] for o in options} == {o.key for o in TUNING_OPTIONS}
    assert all(o["problems"] == [] and o["applies"] for o in options)
    assert all("Qwen3.5-397B-A17B.md" in o["source"] for o in options)


def test_prefix_caching_off_is_a_multi_node_option() -> None:
    single = {o["key"]: o for o in tuning_options("0.23.0", nodes=1)}
    assert single["no_prefix_caching_multi_node"]["applies"] is False
    assert single["full_decode_graph"]["applies"] is True


def test_a_flag_the_version_lacks_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import tuning

    bogus = TuningOption(key="x", reason="r", source="s", flags=("--no-such-flag",))
    monkeypatch.setattr(tuning, "TUNING_OPTIONS", (bogus,))
    assert tuning_options("0.23.0", nodes=4)[0]["problems"]


def test_the_options_build_into_a_plan() -> None:
    flags = [f for o in tuning_options("0.23.0", nodes=4) for f in o["flags"]]
    profile = dataclasses.replace(
        demo_profile(), extra_flags=flags, enable_prefix_caching=False
    )
    plan = build_plan("qwen35-prod", demo_nodes(), profile)
    argv = plan.nodes[1].argv
    assert "--no-enable-prefix-caching" in argv
    assert (
        argv[argv.index("--compilation-config") + 1]
        == '{"cudagraph_mode":"FULL_DECODE_ONLY"}'
    )
    assert argv[argv.index("--seed") + 1] == "1024"
