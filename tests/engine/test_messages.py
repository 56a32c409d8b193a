from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.messages import FIELD_CHECKS, MessageRefused, check_message, check_plan
from engine.plans import build_plan
from tests.engine.test_plans import demo_nodes, demo_profile


def good_plan() -> dict:
    return build_plan("qwen35-prod", demo_nodes(), demo_profile()).nodes[1].to_dict()


def test_it_accepts_the_plans_build_plan_makes() -> None:
    for node in build_plan("qwen35-prod", demo_nodes(), demo_profile()).nodes:
        check_message("engine.start", {"node": node.name, "plan": node.to_dict()})


@pytest.mark.parametrize("role", ["worker", "head\nExecStartPre=+/bin/id", "", None, 1])
def test_it_accepts_only_known_roles(role: object) -> None:
    with pytest.raises(MessageRefused, match="plan.role"):
        check_plan({**good_plan(), "role": role})


def test_it_covers_every_task_of_the_agent() -> None:
    from engine.agent import ALLOWED_TASKS

    assert set(FIELD_CHECKS) == set(ALLOWED_TASKS)


def test_it_refuses_an_unknown_task_and_an_unknown_argument() -> None:
    with pytest.raises(MessageRefused, match="not allowed"):
        check_message("os.system", {"node": "a"})
    with pytest.raises(MessageRefused, match="'cmd' is not allowed"):
        check_message("engine.status", {"node": "a", "cmd": "id"})


@pytest.mark.parametrize("node", ["../etc", "a b", "a\n", "", 5, "x" * 64])
def test_it_refuses_a_node_that_is_no_node_name(node: object) -> None:
    with pytest.raises(MessageRefused, match="node"):
        check_message("node.heartbeat", {"node": node})


@given(st.text(max_size=30))
def test_a_plan_with_a_control_character_anywhere_is_refused(text: str) -> None:
    plan = good_plan()
    plan["argv"] = [*plan["argv"], text]
    plan["env"] = {**plan["env"], "HF_HOME": text}
    has_control = any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)
    if has_control:
        with pytest.raises(MessageRefused):
            check_plan(plan)
    else:
        check_plan(plan)
