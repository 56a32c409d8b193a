"""What the simulated model answers beyond random words: a few checkable facts, and garbage.

``known`` makes the sim behave like a working model on the correctness gate's kinds of
question (two-number arithmetic, a handful of facts, a one-line Python function), so the
gate can be seen passing against a real sim engine. ``garbled`` is the ``garbled`` fault:
a degenerate loop after mixed-script junk, the two shapes vllm-ascend users report —
"and the English and the English …" on a 2-node 910B Kimi-K2.5 (vllm-project/vllm-ascend
#10503) and "vertisementclosed:\\".$ adhere sustained ה Various草肉 acheter逐渐" (#463),
repeated output on 0.23.0rc1 (#13381, #14085). It runs to ``max_tokens`` (finish_reason
"length"), as a model stuck in a loop never samples its end-of-text token.
"""

from __future__ import annotations

import random
import re

from engine.sim.vllm.text import Completion, split

_ARITH_RE = re.compile(r"(\d{1,6})\s*([-+*])\s*(\d{1,6})")
_FACTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"capital of France", re.I), "The capital of France is Paris."),
    (re.compile(r"days are there in a week|days in a week", re.I), "Seven."),
    (re.compile(r"chemical symbol for gold", re.I), "Au"),
    (
        re.compile(r"Python function named (\w+) that returns the sum", re.I),
        "def {0} (a, b): return a + b",
    ),
)
_JUNK: tuple[str, ...] = (
    "vertisementclosed",
    "adhere",
    "草肉acheter",
    "逐渐nextState",
    "ה",
    "挡极obligations",
    "Eminński",
    "primitives南山",
    "CHAPTERSimulation",
    "地产复兴isser",
)
_LOOP: tuple[str, ...] = ("and", "the", "English")


def known(prompt: str) -> list[str] | None:
    """Tokens of the right answer when ``prompt`` asks a question the sim knows, else None."""
    for pattern, answer in _FACTS:
        m = pattern.search(prompt)
        if m:
            return split(answer.format(*m.groups()))
    if re.search(r"\bWhat is\b", prompt):
        m = _ARITH_RE.search(prompt)
        if m:
            a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
            value = a + b if op == "+" else a - b if op == "-" else a * b
            return split(f"The answer is {value}.")
    return None


def garbled(seed: int, max_tokens: int) -> Completion:
    """A degenerate answer: a few mixed-script junk tokens, then a loop up to ``max_tokens``."""
    rng = random.Random(seed)
    toks = [rng.choice(_JUNK) for _ in range(min(6, max_tokens))]
    while len(toks) < max_tokens:
        toks.append(_LOOP[(len(toks) - 6) % len(_LOOP)])
    return Completion(toks[:max_tokens], "length")


def answer(prompt: str, max_tokens: int) -> Completion | None:
    """The known answer as a completion ending on end-of-text (cut at ``max_tokens``)."""
    toks = known(prompt)
    if toks is None:
        return None
    if len(toks) > max_tokens:
        return Completion(toks[:max_tokens], "length")
    return Completion(toks, "stop")
