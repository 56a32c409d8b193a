"""Deterministic tokenizer and text generator for the vLLM simulator.

Tokens are words and punctuation marks (``\\w+`` or one non-space symbol), so token
counts track word counts. Ids come from a fixed vocabulary; words outside it get a
stable id from a hash, remembered per process so ``/detokenize`` can map them back.
Generated text is plain English words chosen by a seed (the prompt hash), so the same
prompt always gets the same answer.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_NO_SPACE_BEFORE = frozenset(".,;:!?)]}%'\"")
_NO_SPACE_AFTER = frozenset("([{")

# The answer vocabulary; the tokenizer vocabulary is these plus punctuation.
WORDS: tuple[str, ...] = tuple(
    """the a an of to in on for with by from at as is are was be been this that these
    it its model engine node nodes cluster server request requests token tokens
    batch cache memory latency throughput expert experts layer layers attention
    prefix decode prefill queue ascend npu npus link links traffic router rank ranks
    parallel tensor data pipeline simple clear fast steady stable large small long
    short good better best first next last each every many more most some other same
    new old high low full empty ready busy quiet can will may should would could
    must does did has have had makes keeps moves runs holds serves answers reads
    writes sends takes gives shows finds uses starts stops waits value result answer
    question example reason method system service process step steps time second
    seconds minute order part group window report level state plan check and or but
    so then when while because if although also only just still even very we you
    they he she one two three four five six seven eight nine ten
    """.split()
)
_PUNCT: tuple[str, ...] = (
    ".",
    ",",
    "!",
    "?",
    ";",
    ":",
    "'",
    '"',
    "(",
    ")",
    "-",
    "/",
    "[",
    "]",
    "{",
    "}",
)
_SPECIAL: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_BASE_VOCAB: tuple[str, ...] = _SPECIAL + _PUNCT + WORDS
_HASH_BASE = 1000  # ids below this are the fixed vocabulary
VOCAB_SIZE = 248_320  # Qwen3.5's padded vocabulary size

_ID_OF: dict[str, int] = {w: i for i, w in enumerate(_BASE_VOCAB)}
_WORD_OF: dict[int, str] = dict(enumerate(_BASE_VOCAB))


def split(text: str) -> list[str]:
    """Split text into token strings (words and single punctuation marks)."""
    return _TOKEN_RE.findall(text)


def token_id(tok: str) -> int:
    """Stable id of one token string; unseen strings are hashed and remembered."""
    tid = _ID_OF.get(tok)
    if tid is None:
        digest = hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest()
        tid = _HASH_BASE + int.from_bytes(digest, "big") % (VOCAB_SIZE - _HASH_BASE)
        _ID_OF[tok] = tid
        _WORD_OF.setdefault(tid, tok)
    return tid


def encode(text: str) -> list[int]:
    """Token ids of ``text``."""
    return [token_id(t) for t in split(text)]


def join(tokens: list[str]) -> str:
    """Join token strings back into readable text (no space before punctuation)."""
    out: list[str] = []
    for tok in tokens:
        if out and tok not in _NO_SPACE_BEFORE and out[-1] not in _NO_SPACE_AFTER:
            out.append(" ")
        out.append(tok)
    return "".join(out)


def pieces(tokens: list[str]) -> list[str]:
    """Per-token deltas, as a stream sends them: ``"".join(pieces(t)) == join(t)``."""
    out: list[str] = []
    prev: str | None = None
    for tok in tokens:
        space = (
            prev is not None
            and tok not in _NO_SPACE_BEFORE
            and prev not in _NO_SPACE_AFTER
        )
        out.append((" " if space else "") + tok)
        prev = tok
    return out


def decode(ids: list[int]) -> str:
    """Text of token ids; an id unknown to this process raises ValueError naming it."""
    words: list[str] = []
    for i in ids:
        word = _WORD_OF.get(i)
        if word is None:
            raise ValueError(f"token id {i} is not known to this tokenizer")
        words.append(word)
    return join(words)


def seed_of(text: str) -> int:
    """A stable 64-bit seed from the prompt text (the same prompt, the same answer)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Completion:
    """Generated output: its tokens (strings), and why it ended ("stop" or "length")."""

    tokens: list[str]
    finish_reason: str
    stop_reason: str | None = None  # the stop string that ended it, if any


def natural_length(seed: int, lo: int = 48, hi: int = 320) -> int:
    """How many tokens the simulated model "wants" to write before its end-of-text."""
    return random.Random(seed ^ 0x5EED).randint(lo, hi)


def _words(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    toks: list[str] = []
    sentence = 0
    while len(toks) < count:
        w = rng.choice(WORDS)
        toks.append(w.capitalize() if sentence == 0 else w)
        sentence += 1
        if sentence >= 6 and rng.random() < 0.18:
            toks.append(".")
            sentence = 0
        elif sentence >= 3 and rng.random() < 0.06:
            toks.append(",")
    return toks[:count]


def generate(
    seed: int,
    max_tokens: int,
    *,
    stop: list[str] | None = None,
    ignore_eos: bool = False,
) -> Completion:
    """Deterministic answer for ``seed``: up to ``max_tokens`` tokens.

    Ends with finish_reason "stop" at the natural length or at the first stop string
    (which is not included, like vLLM), else "length" at ``max_tokens``.
    """
    natural = natural_length(seed)
    want = max_tokens if ignore_eos else min(max_tokens, natural)
    toks = _words(seed, want)
    if stop:
        text = join(toks)
        hits = [(text.index(s), s) for s in stop if s and s in text]
        if hits:
            cut, hit = min(hits)
            kept: list[str] = []
            for (
                tok
            ) in toks:  # keep the tokens whose text ends before the stop string starts
                if len(join([*kept, tok])) > cut:
                    break
                kept.append(tok)
            return Completion(kept, "stop", hit)
    if not ignore_eos and natural <= max_tokens:
        return Completion(toks, "stop")
    return Completion(toks, "length")
