"""The correctness gate's bundled samples and their scoring (pure: no Django, no I/O).

Why a gate: garbled or repeated output after a start that looked healthy is one of the
most reported vllm-ascend failures — multi-node Kimi-K2.5 answering "and the English and
the English …" (vllm-project/vllm-ascend#10503), mixed-script junk such as
"vertisementclosed:\\".$ adhere sustained ה Various草肉" (#463), repeated output with
PD-disaggregated GLM on 0.23.0rc1 (#13381, #14085), and repeated/garbled tokens that
break JSON (#15357). A smoke test that fails only on empty text marks such a cluster
serving; these checks do not.

The console sends each :class:`Sample` as one chat request (the chat template is part
of what is checked), then :func:`score` judges the answer; :func:`verdict` turns the
sample results into the gate's pass/fail against a profile's baseline and threshold
(the shape of vllm-ascend's nightly accuracy check: a baseline and a threshold).
"""

from __future__ import annotations

import ast
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

# Literal chat-template tokens that must never reach the client: seeing one means the
# template or the stop-token handling is wrong (Qwen's ChatML markers and end-of-text).
TEMPLATE_MARKERS: tuple[str, ...] = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|start_header_id|>",
)

MAX_TOKENS = 512  # room to finish: an answer that hits this did not stop on its own
REPEAT_RUN_MIN = 4  # an n-gram repeated this many times back to back is a loop
DISTINCT_MIN = 0.35  # distinct 3-grams / all 3-grams below this on long output = a loop
MIXED_WORDS_MAX = (
    0.10  # share of words that mix scripts ("acheter逐渐") before it is junk
)


@dataclass(frozen=True)
class Sample:
    """One bundled prompt and how its answer is checked.

    ``kind``: "number" (the expected number appears as a number), "words" (one of the
    accepted words/phrases appears, case-insensitive, on word boundaries), "python"
    (the answer, or its fenced code block, parses and defines ``expect[0]``), "sanity"
    (no expected content: only the template/repetition/stop checks apply).
    """

    id: str
    kind: str
    prompt: str
    expect: tuple[str, ...] = ()


SAMPLES: tuple[Sample, ...] = (
    Sample(
        "arith-add",
        "number",
        "What is 17 + 25? Answer with the number only.",
        ("42",),
    ),
    Sample(
        "arith-mul", "number", "What is 12 * 11? Answer with the number only.", ("132",)
    ),
    Sample(
        "arith-sub", "number", "What is 100 - 37? Answer with the number only.", ("63",)
    ),
    Sample(
        "qa-capital",
        "words",
        "What is the capital of France? Answer in one word.",
        ("paris",),
    ),
    Sample(
        "qa-week",
        "words",
        "How many days are there in a week? Answer in one word.",
        ("7", "seven"),
    ),
    Sample(
        "qa-gold",
        "words",
        "What is the chemical symbol for gold? Answer with the symbol only.",
        ("au",),
    ),
    Sample(
        "code-add",
        "python",
        "Write a one-line Python function named add that returns the sum of a and b. "
        "Reply with the code only.",
        ("add",),
    ),
    Sample(
        "chat-sanity",
        "sanity",
        "Describe in a few sentences what an inference server does.",
    ),
)


@dataclass
class SampleResult:
    """What one sample's answer scored: ``correct`` (content), ``problems`` (sanity)."""

    id: str
    kind: str
    prompt: str
    answer: str
    finish_reason: str | None
    correct: bool
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.correct and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


@dataclass
class Verdict:
    """The gate's outcome: accuracy over content samples, any sanity problem, pass/fail."""

    passed: bool
    accuracy: float
    baseline: float
    threshold: float
    results: list[SampleResult]
    reason: str

    @property
    def failing(self) -> list[SampleResult]:
        return [r for r in self.results if not r.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "accuracy": self.accuracy,
            "baseline": self.baseline,
            "threshold": self.threshold,
            "reason": self.reason,
            "samples": [r.to_dict() for r in self.results],
        }


_WORD_RE = re.compile(r"\w+", re.UNICODE)
_NUM_RE = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_FENCE_RE = re.compile(r"```(?:python|py)?\s*\n?(.*?)```", re.DOTALL)


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _scripts(word: str) -> set[str]:
    """Scripts of a word's letters, coarse: LATIN, CJK, HEBREW, CYRILLIC, THAI, …"""
    out: set[str] = set()
    for ch in word:
        if not ch.isalpha():
            continue
        name = unicodedata.name(ch, "")
        first = name.split(" ")[0] if name else "?"
        if first in ("CJK", "HIRAGANA", "KATAKANA", "HANGUL"):
            first = "CJK"  # Chinese/Japanese/Korean mix legitimately
        out.add(first)
    return out


def repetition_problem(tokens: list[str]) -> str | None:
    """A runaway loop in ``tokens``: an n-gram (n ≤ 8) repeated back to back, or few distinct 3-grams."""
    n_tok = len(tokens)
    for n in range(1, 9):
        if n * REPEAT_RUN_MIN > n_tok:
            break
        run = 1
        for i in range(n, n_tok - n + 1, n):
            if tokens[i : i + n] == tokens[i - n : i]:
                run += 1
                if run >= REPEAT_RUN_MIN:
                    gram = " ".join(tokens[i : i + n])
                    return f"runaway repetition: {gram!r} repeated {run}+ times"
            else:
                run = 1
    if n_tok >= 40:
        grams = [tuple(tokens[i : i + 3]) for i in range(n_tok - 2)]
        ratio = len(set(grams)) / len(grams)
        if ratio < DISTINCT_MIN:
            return f"runaway repetition: only {ratio:.0%} distinct 3-grams"
    return None


def sanity_problems(answer: str, finish_reason: str | None) -> list[str]:
    """Template/stop/repetition/junk problems of one answer (empty list = sane)."""
    problems: list[str] = []
    if not answer.strip():
        problems.append("empty answer")
    for marker in TEMPLATE_MARKERS:
        if marker in answer:
            problems.append(f"chat-template token {marker} in the text")
            break
    if finish_reason != "stop":
        problems.append(
            f"did not stop at the stop token (finish_reason={finish_reason!r})"
        )
    words = _WORD_RE.findall(answer)
    loop = repetition_problem(words)
    if loop:
        problems.append(loop)
    if words:
        mixed = [w for w in words if len(_scripts(w)) > 1]
        if len(mixed) / len(words) > MIXED_WORDS_MAX:
            problems.append(
                f"mixed-script junk: {len(mixed)}/{len(words)} words mix scripts "
                f"(e.g. {mixed[0]!r})"
            )
    return problems


def _python_ok(answer: str, name: str) -> bool:
    fenced = _FENCE_RE.search(answer)
    code = fenced.group(1) if fenced else answer
    try:
        tree = ast.parse(code.strip())
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.FunctionDef | ast.Lambda | ast.Assign)
        and (
            getattr(node, "name", None) == name
            or any(
                isinstance(t, ast.Name) and t.id == name
                for t in getattr(node, "targets", [])
            )
        )
        for node in ast.walk(tree)
    )


def correct(sample: Sample, answer: str) -> bool:
    """Whether ``answer`` holds the sample's expected content, tolerant of wording."""
    if sample.kind == "number":
        found = {
            m.group(0).rstrip("0").rstrip(".") if "." in m.group(0) else m.group(0)
            for m in _NUM_RE.finditer(answer.replace(",", ""))
        }
        return any(e in found for e in sample.expect)
    if sample.kind == "words":
        text = _normal(answer)
        return any(
            re.search(rf"(?<!\w){re.escape(_normal(e))}(?!\w)", text)
            for e in sample.expect
        )
    if sample.kind == "python":
        return _python_ok(answer, sample.expect[0])
    if sample.kind == "sanity":
        return True
    raise ValueError(
        f"unknown sample kind {sample.kind!r}; use number|words|python|sanity"
    )


_THINK_RE = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


def strip_reasoning(answer: str) -> str:
    """The answer without a leading ``<think>…</think>`` block.

    Qwen3-family templates think unless ``enable_thinking`` is false, and the switch
    is not always honoured (vllm-project/vllm#35574); without a reasoning parser the
    block lands in ``content``. An unclosed block is left in place (and then fails).
    """
    return _THINK_RE.sub("", answer, count=1)


def score(sample: Sample, answer: str, finish_reason: str | None) -> SampleResult:
    """Score one answer (after any leading reasoning block): its content and its sanity."""
    answer = strip_reasoning(answer)
    return SampleResult(
        id=sample.id,
        kind=sample.kind,
        prompt=sample.prompt,
        answer=answer,
        finish_reason=finish_reason,
        correct=correct(sample, answer),
        problems=sanity_problems(answer, finish_reason),
    )


def verdict(results: list[SampleResult], baseline: float, threshold: float) -> Verdict:
    """Pass when no answer has a sanity problem and accuracy ≥ baseline − threshold.

    Accuracy counts the content samples (not "sanity" ones). Raises ValueError on an
    empty result list (a gate that asked nothing proves nothing).
    """
    if not results:
        raise ValueError("no sample results: the gate asked nothing")
    graded = [r for r in results if r.kind != "sanity"]
    accuracy = sum(r.correct for r in graded) / len(graded) if graded else 1.0
    insane = [r for r in results if r.problems]
    floor = baseline - threshold
    if insane:
        first = insane[0]
        reason = (
            f"{len(insane)} answer(s) failed sanity; {first.id}: {first.problems[0]}"
        )
        ok = False
    elif accuracy + 1e-9 < floor:
        wrong = ", ".join(r.id for r in graded if not r.correct)
        reason = f"accuracy {accuracy:.2f} < baseline {baseline:.2f} − threshold {threshold:.2f} (wrong: {wrong})"
        ok = False
    else:
        reason = f"accuracy {accuracy:.2f} ≥ {floor:.2f}; every answer sane"
        ok = True
    return Verdict(ok, accuracy, baseline, threshold, results, reason)
