"""Helpers shared by the npu-smi and hccn_tool parsers (private)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from engine.parsers import ParseError, Unsupported, split_lines

# Values npu-smi prints when a reading is not available on this device.
NOT_AVAILABLE = frozenset({"NA", "N/A", "-"})

# Docs elide rows with "..." (or "... ..."); real output never has them.
_ELISION = re.compile(r"^(\.\.\.|…)(\s+(\.\.\.|…))*$")

# What npu-smi prints instead of data when the command or type is missing
# (npu_cmd_parse.c parse_npu_info_not_watch_proc_param, npu_info.c help text).
_NPU_SMI_UNSUPPORTED = (
    re.compile(r"^This device does not support (querying|setting) "),
    re.compile(r"^Error parameter of "),
    re.compile(r"^Usage: npu-smi "),
    re.compile(r"^Input parameter format error"),
)


def numbered(text: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line) for every line of ``text``."""
    yield from enumerate(split_lines(text), start=1)


def is_elision(stripped: str) -> bool:
    return bool(_ELISION.match(stripped))


def check_npu_smi_unsupported(text: str) -> None:
    """Raise Unsupported when npu-smi answered with an error/usage text."""
    for _, line in numbered(text):
        stripped = line.strip()
        if not stripped:
            continue
        for pattern in _NPU_SMI_UNSUPPORTED:
            if pattern.match(stripped):
                raise Unsupported(
                    f"npu-smi does not support this query: {stripped}", raw=text
                )
        return


def require_text(text: str, tool: str) -> None:
    if not text.strip():
        raise ParseError(f"empty {tool} output", raw=text)


def to_int(value: str, *, what: str, raw: str, line: int | None) -> int:
    """Parse a non-negative decimal integer or raise ParseError naming ``what``."""
    if not re.fullmatch(r"\d+", value):
        raise ParseError(
            f"{what}: expected an integer, got {value!r}", raw=raw, line=line
        )
    return int(value)


def to_opt_int(value: str, *, what: str, raw: str, line: int | None) -> int | None:
    if value in NOT_AVAILABLE:
        return None
    return to_int(value, what=what, raw=raw, line=line)


def to_opt_float(value: str, *, what: str, raw: str, line: int | None) -> float | None:
    """Parse a decimal number; NA / N/A / - mean "not available" → None."""
    if value in NOT_AVAILABLE:
        return None
    if not re.fullmatch(r"-?\d+(\.\d+)?", value):
        raise ParseError(
            f"{what}: expected a number, got {value!r}", raw=raw, line=line
        )
    return float(value)
