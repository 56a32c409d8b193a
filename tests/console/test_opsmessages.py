"""Operational content is stored once and read in each reader's language."""

from __future__ import annotations

from django.utils import translation

from console.opsmessages import (
    DECISIONS,
    ENGINE_STATES,
    MESSAGES,
    SENTENCES,
    prose,
    render,
    word,
)


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
                *SENTENCES.values(),
            ]
            if translation.gettext(text) == text
        ]
    assert untranslated == []


def test_it_translates_known_sentences_inside_longer_prose() -> None:
    """A remedy's "why" is made of sentences (monitoring/opstext.py SENTENCES); the
    known ones are translated where they stand, a citation stays as written."""
    text = (
        "No idle spare of the same server model (Atlas 800T A3) is available. "
        "[hicann/hccl docs @1bb23ddbf917]"
    )
    with translation.override("zh-hans"):
        assert prose(text) == (
            "没有相同服务器型号（Atlas 800T A3）的空闲备机。[hicann/hccl docs @1bb23ddbf917]"
        )
        assert render(
            "Server model: Atlas 800T A3.\n1. escalate — can work here: yes; no restart."
        ) == ("服务器型号：Atlas 800T A3。\n1. escalate — 在此可行：是；不重启。")
    with translation.override("en"):
        assert prose(text) == text


def test_the_gate_step_and_its_verdicts_read_in_zh_hans() -> None:
    from django.utils import translation

    from console.opsmessages import render

    with translation.override("zh-hans"):
        assert render("Correctness gate") == "正确性检查"
        assert render("accuracy 1.00 ≥ 0.80; every answer sane") == (
            "准确率 1.00 ≥ 0.80；所有回答均合理"
        )
        failed = render(
            "correctness gate failed: 2 answer(s) failed sanity; arith-add: wrong"
        )
        assert failed.startswith("正确性检查未通过：2 个回答未通过合理性检查")
