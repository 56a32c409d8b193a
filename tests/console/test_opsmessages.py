"""Operational content is stored once and read in each reader's language."""

from __future__ import annotations

from django.utils import translation

from console.opsmessages import DECISIONS, ENGINE_STATES, MESSAGES, render, word


def test_it_renders_stored_english_and_message_ids_in_the_readers_language() -> None:
    with translation.override("zh-hans"):
        assert (
            render("Stop first: Stop rank 3 on ascend-04")
            == "先停止：停止 ascend-04 上的 rank 3"
        )
        assert render(
            {"id": "step.start_rank", "params": {"rank": 0, "node": "ascend-01"}}
        ) == ("在 ascend-01 上启动 rank 0")
        assert word(ENGINE_STATES, "running") == "运行中"
        assert word(DECISIONS, "verify") == "验证"
        assert (
            render("something a newer worker wrote") == "something a newer worker wrote"
        )
    with translation.override("en"):
        assert (
            render("Preflight checks on ascend-02") == "Preflight checks on ascend-02"
        )


def test_every_message_has_a_zh_hans_translation() -> None:
    with translation.override("zh-hans"):
        untranslated = [
            text
            for text in [
                *MESSAGES.values(),
                *ENGINE_STATES.values(),
                *DECISIONS.values(),
            ]
            if translation.gettext(text) == text
        ]
    assert untranslated == []
