"""The block reader of npu-smi ``key : value`` output: blank-line separated blocks,
typed access to their values, and the card/chip split of the per-chip types."""

from __future__ import annotations

from dataclasses import dataclass

from engine.parsers import ParseError
from engine.parsers._common import (
    NOT_AVAILABLE,
    check_npu_smi_unsupported,
    is_elision,
    numbered,
    require_text,
    to_int,
    to_opt_float,
    to_opt_int,
)


@dataclass
class _Block:
    values: dict[str, str]
    lines: dict[str, int]
    first_line: int


def _blocks(text: str) -> list[_Block]:
    require_text(text, "npu-smi")
    check_npu_smi_unsupported(text)
    blocks: list[_Block] = []
    current: _Block | None = None
    for lineno, line in numbered(text):
        s = line.strip()
        if not s:
            current = None
            continue
        if is_elision(s):
            continue
        key, sep, value = s.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ParseError("expected 'key : value'", raw=text, line=lineno)
        if current is None:
            current = _Block(values={}, lines={}, first_line=lineno)
            blocks.append(current)
        if key in current.values:
            raise ParseError(
                f"duplicate key {key!r} in one block", raw=text, line=lineno
            )
        current.values[key] = value
        current.lines[key] = lineno
    if not blocks:
        raise ParseError("no 'key : value' lines in npu-smi output", raw=text)
    return blocks


def parse_kv(text: str) -> list[dict[str, str]]:
    """Blocks of ``key : value`` pairs, in output order; keys and values stripped."""
    return [dict(b.values) for b in _blocks(text)]


# -- typed helpers ---------------------------------------------------------------


def _int(block: _Block, key: str, raw: str) -> int | None:
    if key not in block.values:
        return None
    return to_opt_int(block.values[key], what=key, raw=raw, line=block.lines[key])


def _float(block: _Block, key: str, raw: str) -> float | None:
    if key not in block.values:
        return None
    return to_opt_float(block.values[key], what=key, raw=raw, line=block.lines[key])


def _str(block: _Block, key: str) -> str | None:
    value = block.values.get(key)
    if value is None or value in NOT_AVAILABLE:
        return None
    return value


def _card_and_chips(text: str) -> tuple[int | None, list[_Block], list[_Block]]:
    """Split ``-t usages|temp|power|common`` output into (npu id, chip blocks, others).

    The card block carries ``NPU ID`` / ``Chip Count``; each chip block carries
    ``Chip ID``; anything else (the MCU sensor block) is returned as "others".
    """
    blocks = _blocks(text)
    npu_id: int | None = None
    chip_count: int | None = None
    chips: list[_Block] = []
    others: list[_Block] = []
    for b in blocks:
        if "NPU ID" in b.values:
            npu_id = _int(b, "NPU ID", text)
            chip_count = _int(b, "Chip Count", text)
        if "Chip ID" in b.values:
            _int(b, "Chip ID", text)  # validates the id
            chips.append(b)
        elif "NPU ID" not in b.values:
            others.append(b)
    if not chips:
        raise ParseError(
            "no 'Chip ID' block in npu-smi output", raw=text, line=blocks[0].first_line
        )
    if chip_count is not None and chip_count != len(chips):
        raise ParseError(
            f"'Chip Count' says {chip_count} but {len(chips)} chip block(s) follow",
            raw=text,
            line=blocks[0].first_line,
        )
    return npu_id, chips, others


def _chip_id(b: _Block, raw: str) -> int:
    return to_int(b.values["Chip ID"], what="Chip ID", raw=raw, line=b.lines["Chip ID"])


def _single_block(text: str) -> _Block:
    blocks = _blocks(text)
    if len(blocks) != 1:
        raise ParseError(
            f"expected one block, found {len(blocks)}",
            raw=text,
            line=blocks[1].first_line,
        )
    return blocks[0]
