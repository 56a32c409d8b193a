"""The correctness gate's scoring (engine/gate.py), on wording variants and reported garbage."""

from __future__ import annotations

import pytest

from engine import gate
from engine.sim.vllm import answers

BY_ID = {s.id: s for s in gate.SAMPLES}


@pytest.mark.parametrize(
    ("sample_id", "answer"),
    [
        ("arith-add", "42"),
        ("arith-add", "The answer is 42."),
        ("arith-add", "17 + 25 = 42"),
        ("arith-mul", "12 × 11 equals 132."),
        ("qa-capital", "Paris"),
        ("qa-capital", "The capital of France is **Paris**."),
        ("qa-week", "Seven."),
        ("qa-week", "There are 7 days in a week."),
        ("qa-gold", "Au"),
        ("code-add", "def add(a, b): return a + b"),
        ("code-add", "```python\ndef add(a, b):\n    return a + b\n```"),
        ("code-add", "add = lambda a, b: a + b"),
    ],
)
def test_it_accepts_right_answers_in_any_wording(sample_id: str, answer: str) -> None:
    assert gate.correct(BY_ID[sample_id], answer)


@pytest.mark.parametrize(
    ("sample_id", "answer"),
    [
        ("arith-add", "The answer is 43."),
        ("arith-add", "420"),
        ("qa-capital", "Lyon"),
        ("qa-capital", "Parisian food"),  # word boundary: not "paris"
        ("qa-gold", "Ag"),
        ("code-add", "def add(a, b) return a + b"),  # does not parse
        ("code-add", "def plus(a, b): return a + b"),  # wrong name
    ],
)
def test_it_rejects_wrong_answers(sample_id: str, answer: str) -> None:
    assert not gate.correct(BY_ID[sample_id], answer)


def test_it_flags_the_reported_repetition_loop() -> None:
    # the shape of vllm-project/vllm-ascend#10503 (multi-node Kimi-K2.5)
    text = "h and the English " + "and the English " * 30 + "and the of the"
    problems = gate.sanity_problems(text, "length")
    assert any("runaway repetition" in p for p in problems)
    assert any("did not stop" in p for p in problems)


def test_it_flags_mixed_script_junk() -> None:
    # the shape of vllm-project/vllm-ascend#463
    text = "vertisementclosed adhere sustained Various草肉 acheter逐渐 nextState_language 出品Clause"
    problems = gate.sanity_problems(text, "stop")
    assert any("mixed-script" in p for p in problems)


def test_it_flags_a_leaked_template_token() -> None:
    problems = gate.sanity_problems(
        "Hello operators.<|im_end|>\n<|im_start|>user", "stop"
    )
    assert any("chat-template token" in p for p in problems)


def test_it_passes_normal_english_and_chinese() -> None:
    assert gate.sanity_problems("The capital of France is Paris.", "stop") == []
    assert gate.sanity_problems("法国的首都是巴黎。它也是最大的城市。", "stop") == []


def test_the_verdict_holds_the_baseline_and_threshold() -> None:
    right = {
        s.id: a
        for s, a in zip(
            gate.SAMPLES,
            [
                "42",
                "132",
                "63",
                "Paris",
                "7",
                "Au",
                "def add(a, b): return a + b",
                "An inference server answers requests.",
            ],
            strict=True,
        )
    }
    results = [gate.score(s, right[s.id], "stop") for s in gate.SAMPLES]
    assert gate.verdict(results, 1.0, 0.2).passed
    results[0] = gate.score(BY_ID["arith-add"], "41", "stop")  # 6/7 ≈ 0.86 ≥ 0.8
    assert gate.verdict(results, 1.0, 0.2).passed
    results[1] = gate.score(BY_ID["arith-mul"], "131", "stop")  # 5/7 ≈ 0.71 < 0.8
    v = gate.verdict(results, 1.0, 0.2)
    assert not v.passed and "arith-add" in v.reason and "arith-mul" in v.reason


def test_one_insane_answer_fails_the_gate_whatever_the_accuracy() -> None:
    results = [gate.score(s, "x", "stop") for s in gate.SAMPLES]
    results[-1] = gate.score(BY_ID["chat-sanity"], "ok ok ok ok ok ok", "length")
    v = gate.verdict(results, 0.0, 0.0)
    assert not v.passed and "chat-sanity" in v.reason


def test_the_sims_garbled_output_fails_every_sample() -> None:
    junk = answers.garbled(1234, gate.MAX_TOKENS)
    from engine.sim.vllm.text import join

    text = join(junk.tokens)
    for sample in gate.SAMPLES:
        assert not gate.score(sample, text, junk.finish_reason).passed


def test_the_sims_known_answers_pass_every_content_sample() -> None:
    from engine.sim.vllm.text import join

    for sample in gate.SAMPLES:
        if sample.kind == "sanity":
            continue
        toks = answers.known(sample.prompt)
        assert toks is not None, sample.id
        assert gate.score(sample, join(toks), "stop").passed, (sample.id, join(toks))


def test_a_leading_reasoning_block_is_not_scored() -> None:
    result = gate.score(
        BY_ID["arith-add"],
        "<think>\n17 plus 25, carry the one: 43? no, 42.\n</think>\n\n42",
        "stop",
    )
    assert result.passed and result.answer == "42"
    unclosed = gate.score(
        BY_ID["qa-capital"], "<think>\nLet me think about Paris", "length"
    )
    assert not unclosed.passed
