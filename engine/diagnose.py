"""Log diagnosis: match an engine/HCCL/CANN log tail against known signatures.

The signatures are data (``engine/signatures.json``): a regex list, a cause and a fix
(English and zh-Hans), a severity, and a specificity used to list the root cause first.
``EE9999`` (runtime inner error) is resolved to the runtime result code that follows it.

    python -m engine.diagnose FILE|-  [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

SIGNATURES_FILE = Path(__file__).with_name("signatures.json")
# Lines are matched up to this many characters: every signature's text is near the
# start of its line, and a plog or dump line of megabytes must not stall the regexes.
MAX_LINE_CHARS = 2000


@dataclass(frozen=True)
class Signature:
    id: str
    severity: str
    specificity: int
    patterns: tuple[re.Pattern[str], ...]
    runtime_codes: tuple[str, ...]
    supersedes: tuple[str, ...]
    cause: str
    fix: str
    cause_zh: str
    fix_zh: str


@dataclass
class Diagnosis:
    """One recognised problem: its meaning, what to do, and the line that shows it.

    ``line`` is 1-based; ``related`` holds other evidence lines (e.g. the EE9999 line a
    runtime result code resolved).
    """

    id: str
    severity: str
    cause: str
    fix: str
    evidence: str
    line: int
    cause_zh: str = ""
    fix_zh: str = ""
    related: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Table:
    signatures: tuple[Signature, ...]
    by_id: dict[str, Signature]
    by_code: dict[str, Signature]
    code_re: re.Pattern[str]
    hccl_results: dict[str, str]
    ee9999_window: int


@lru_cache(maxsize=1)
def load_table(path: str = str(SIGNATURES_FILE)) -> _Table:
    """Load and compile the signature table. Raises ValueError naming a bad entry."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    sigs: list[Signature] = []
    for entry in raw["signatures"]:
        try:
            sig = Signature(
                id=entry["id"],
                severity=entry["severity"],
                specificity=int(entry["specificity"]),
                patterns=tuple(re.compile(p, re.IGNORECASE) for p in entry["patterns"]),
                runtime_codes=tuple(entry.get("runtime_codes", [])),
                supersedes=tuple(entry.get("supersedes", [])),
                cause=entry["cause"],
                fix=entry["fix"],
                cause_zh=entry.get("cause_zh", ""),
                fix_zh=entry.get("fix_zh", ""),
            )
        except (KeyError, re.error, ValueError) as e:
            raise ValueError(
                f"bad signature {entry.get('id', '?')!r} in {path}: {e}"
            ) from e
        sigs.append(sig)
    by_code = {code: s for s in sigs for code in s.runtime_codes}
    return _Table(
        signatures=tuple(sigs),
        by_id={s.id: s for s in sigs},
        by_code=by_code,
        code_re=re.compile(raw["runtime_code_pattern"], re.IGNORECASE),
        hccl_results=dict(raw.get("hccl_results", {})),
        ee9999_window=int(raw.get("ee9999_window_lines", 80)),
    )


@dataclass
class _Hit:
    sig: Signature
    index: int  # 0-based line index
    groups: dict[str, str]
    related: list[str] = field(default_factory=list)


def diagnose(lines: list[str]) -> list[Diagnosis]:
    """Return one Diagnosis per recognised signature, most specific (root cause) first.

    Each signature is reported once, with its earliest matching line as evidence.
    A signature in another match's ``supersedes`` (a known consequence) is dropped.
    """
    table = load_table()
    hits: dict[str, _Hit] = {}
    ee9999: list[int] = []  # lines with EE9999 (runtime inner error)
    codes: list[tuple[int, Signature]] = []  # lines with a known runtime result code
    for i, raw_line in enumerate(lines):
        line = raw_line.rstrip("\r\n")[:MAX_LINE_CHARS]
        for sig in table.signatures:
            for pattern in sig.patterns:
                m = pattern.search(line)
                if m:
                    if sig.id == "EE9999":
                        ee9999.append(i)
                    if sig.id not in hits:
                        groups = {
                            k: v for k, v in m.groupdict().items() if v is not None
                        }
                        hits[sig.id] = _Hit(sig, i, groups)
                    break
        for m in table.code_re.finditer(line):
            code = m.group("code")
            known = table.by_code.get(code)
            if known is None:
                continue
            codes.append((i, known))
            if known.id not in hits:
                hits[known.id] = _Hit(known, i, {"code": code})
    # EE9999 resolves to the runtime result code that follows it
    unresolved = False
    for j in ee9999:
        follow = [sig for k, sig in codes if j <= k <= j + table.ee9999_window]
        if not follow:
            unresolved = True
            continue
        hit = hits[follow[0].id]
        evidence = lines[j].strip()
        if evidence not in hit.related and hit.index != j:
            hit.related.append(evidence)
    if ee9999 and not unresolved:
        hits.pop("EE9999", None)
    dropped = {s for h in hits.values() for s in h.sig.supersedes}
    ordered = sorted(
        (h for h in hits.values() if h.sig.id not in dropped),
        key=lambda h: (-h.sig.specificity, h.index),
    )
    return [_render(h, lines, table) for h in ordered]


def _render(hit: _Hit, lines: list[str], table: _Table) -> Diagnosis:
    values: dict[str, str] = defaultdict(lambda: "?", hit.groups)
    if "hccl_code" in hit.groups:
        values["hccl_name"] = table.hccl_results.get(hit.groups["hccl_code"], "unknown")
    values.setdefault("call", "an HCCL call")
    sig = hit.sig
    return Diagnosis(
        id=sig.id,
        severity=sig.severity,
        cause=sig.cause.format_map(values),
        fix=sig.fix.format_map(values),
        evidence=lines[hit.index].strip(),
        line=hit.index + 1,
        cause_zh=sig.cause_zh.format_map(values),
        fix_zh=sig.fix_zh.format_map(values),
        related=hit.related,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.diagnose",
        description="Diagnose a vLLM / vllm-ascend / HCCL log.",
    )
    parser.add_argument("file", help="log file, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--lang", choices=["en", "zh-Hans"], default="en")
    args = parser.parse_args(argv)
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            parser.error(f"cannot read {args.file}: {e.strerror}")
    found = diagnose(text.splitlines())
    if args.json:
        print(json.dumps([d.to_dict() for d in found], ensure_ascii=False, indent=2))
        return 0
    if not found:
        print("no known error signature found")
        return 0
    zh = args.lang == "zh-Hans"
    for d in found:
        print(f"[{d.severity}] {d.id} (line {d.line})")
        print(f"  evidence: {d.evidence}")
        print(f"  cause:    {d.cause_zh if zh else d.cause}")
        print(f"  fix:      {d.fix_zh if zh else d.fix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
