"""Which `vllm serve` flags a vLLM version accepts, and checking an argv against them.

The flag lists in engine/flaglists/ are copies of the project's reference lists
(taken from each release's argument parser); types.json gives every listed flag its
arity and value type, as vLLM's argparse setup declares it, and the flags older
guides use that are gone now.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from engine.versions import version_key

FLAGLISTS = Path(__file__).resolve().parent / "flaglists"

SUPPORTED_VERSIONS: tuple[str, ...] = ("0.23.0", "0.33.0")

VALUE_TYPES = (
    "any",
    "int",
    "float",
    "str",
    "json",
    "json-or-str",
    "human-int",
    "choice",
    "bool-flag",
)
# vllm.utils.argparse_utils.human_readable_int: 4096, 32k (1000s), 32K (1024s), 25.6k,
# 2M, 1G; a decimal needs a decimal (lower-case) multiplier
_HUMAN_INT = re.compile(r"\d+(\.\d+[kmgt]|[kmgtKMGT])?")
# value types whose flags also take vLLM's dotted JSON keys (--compilation-config.mode 3)
_JSON_TYPES = ("json", "json-or-str")


@dataclass(frozen=True)
class FlagInfo:
    """One `vllm serve` flag: its value type and arity.

    value_type "bool-flag" is a switch (no value); "any" marks a flag whose type no
    vLLM source established (``unverified`` says why): it is accepted as a switch or
    with one value, unchecked, so it is never refused for lacking a value.
    """

    name: str
    value_type: str
    choices: tuple[str, ...] = ()
    boolean_optional: bool = False
    # nargs="+" flags (e.g. --served-model-name a b) take every following value
    multiple: bool = False
    # nargs="?" flags (e.g. --hf-token) may stand alone or take one value
    optional_value: bool = False
    unverified: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = list(self.choices)
        return data


@dataclass(frozen=True)
class FlagProblem:
    """A flag in an argv that the target vLLM version would refuse or misread."""

    flag: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class RemovedFlag:
    """A flag older guides use that a supported version no longer accepts."""

    name: str
    replacement: str | None
    why: str
    removed_before: str | None = None  # absent from every supported version
    removed_in: str | None = (
        None  # absent from this version on (found by diffing the lists)
    )


def argv_value(argv: list[str], flag: str) -> str | None:
    """The value ``flag`` has in an argv (``--flag VALUE`` or ``--flag=VALUE``), or None."""
    for i, token in enumerate(argv):
        if token == flag and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def _require_version(version: str) -> None:
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(SUPPORTED_VERSIONS)
        raise ValueError(
            f"unknown vLLM version {version!r}; supported versions are {supported}"
        )


@cache
def _types() -> dict[str, Any]:
    with open(FLAGLISTS / "types.json", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def _flag_names(version: str) -> frozenset[str]:
    path = FLAGLISTS / f"vllm-{version}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    names = frozenset(
        line.strip() for line in lines if line.strip() and not line.startswith("#")
    )
    if not names or any(not name.startswith("--") for name in names):
        raise ValueError(
            f"unrecognized flag list {path}: every line must be a comment or a --flag"
        )
    return names


@cache
def _flag_table(version: str) -> dict[str, FlagInfo]:
    types: dict[str, dict[str, Any]] = _types()["flags"]
    table: dict[str, FlagInfo] = {}
    for name in sorted(_flag_names(version)):
        spec = types.get(name)
        if spec is None:
            raise ValueError(
                f"types.json has no entry for {name} (vLLM {version} lists it); "
                "add its type from vLLM's argument parser"
            )
        value_type = str(spec.get("type"))
        if value_type not in VALUE_TYPES:
            raise ValueError(f"types.json: {name} has unknown type {value_type!r}")
        if value_type == "choice" and not spec.get("choices"):
            raise ValueError(f"types.json: {name} is a choice without choices")
        table[name] = FlagInfo(
            name=name,
            value_type=value_type,
            choices=tuple(str(c) for c in spec.get("choices", ())),
            boolean_optional=bool(spec.get("boolean_optional", False)),
            multiple=spec.get("nargs") == "+",
            optional_value=spec.get("nargs") == "?" or value_type == "any",
            unverified=spec.get("unverified"),
        )
    return table


def flag_table(version: str) -> dict[str, FlagInfo]:
    """Every flag `vllm serve` accepts in `version`, by name ("--flag").

    Raises ValueError for a version outside SUPPORTED_VERSIONS.
    """
    _require_version(version)
    return dict(_flag_table(version))


def removed_flags() -> dict[str, RemovedFlag]:
    """The table of flags removed from vLLM (old guides still use them), by name."""
    removed: dict[str, dict[str, Any]] = _types()["removed"]
    return {
        name: RemovedFlag(
            name=name,
            replacement=spec.get("replacement"),
            why=str(spec["why"]),
            removed_before=spec.get("removed_before"),
            removed_in=spec.get("removed_in"),
        )
        for name, spec in removed.items()
    }


def _removed_message(flag: str, version: str) -> str | None:
    entry = removed_flags().get(flag)
    if entry is None:
        return None
    fix = f"use {entry.replacement} instead" if entry.replacement else "drop it"
    if entry.removed_before is not None:
        before = entry.removed_before
        return f"{flag} was removed before vLLM {before}; {fix} ({entry.why})"
    if entry.removed_in is not None and version_key(version) >= version_key(
        entry.removed_in
    ):
        older = [v for v in SUPPORTED_VERSIONS if flag in _flag_names(v)]
        had = f" ({', '.join(older)} still has it)" if older else ""
        return (
            f"{flag} was removed by vLLM {entry.removed_in}{had}; {fix} ({entry.why})"
        )
    return None


def _unknown_message(flag: str, version: str, table: dict[str, FlagInfo]) -> str:
    removed = _removed_message(flag, version)
    if removed is not None:
        return removed
    close = difflib.get_close_matches(flag, list(table), n=1, cutoff=0.8)
    hint = (
        f"did you mean {close[0]}?"
        if close
        else "check the spelling or the profile's vLLM version"
    )
    return f"{flag} is not a vllm serve flag in vLLM {version}; {hint}"


def _looks_like_flag(token: str) -> bool:
    """True for "--x" / "-x"; negative numbers like "-1" are values."""
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def _value_problem(info: FlagInfo, value: str) -> str | None:
    kind = info.value_type
    if kind == "int":
        try:
            int(value)
        except ValueError:
            return f"{info.name} takes a whole number, got {value!r}"
    elif kind == "float":
        try:
            float(value)
        except ValueError:
            return f"{info.name} takes a number, got {value!r}"
    elif kind == "choice" and value not in info.choices:
        return f"{info.name} takes one of {', '.join(info.choices)}, got {value!r}"
    elif kind == "human-int" and value not in info.choices:
        if not _HUMAN_INT.fullmatch(value):
            words = "".join(f" or {c}" for c in info.choices)
            return (
                f"{info.name} takes a whole number such as 4096, 32k or 1M{words}, "
                f"got {value!r}"
            )
    elif kind == "json" or (kind == "json-or-str" and value.lstrip().startswith("{")):
        try:
            json.loads(value)
        except ValueError as exc:
            return f"{info.name} takes a JSON value, got {value!r} ({exc})"
    return None


def _lookup(flag: str, table: dict[str, FlagInfo]) -> tuple[FlagInfo | None, bool]:
    """The flag's info and whether it is the --no-<flag> form."""
    if flag in table:
        return table[flag], False
    if flag.startswith("--no-"):
        base = table.get("--" + flag[len("--no-") :])
        # --no-X exists for BooleanOptionalAction flags;
        # a flag of unverified type gets the benefit of the doubt
        if base is not None and (base.boolean_optional or base.value_type == "any"):
            return base, True
    return None, False


def _json_key(flag: str, table: dict[str, FlagInfo]) -> FlagInfo | None:
    """The JSON flag behind vLLM's dotted form ``--compilation-config.mode`` (or
    ``--json-arg.key+``, which appends to a list), else None."""
    base, dot, _ = flag.partition(".")
    info = table.get(base)
    if dot and info is not None and info.value_type in _JSON_TYPES:
        return info
    return None


def check_argv(argv: list[str], version: str) -> list[FlagProblem]:
    """Problems `vllm serve` of `version` would have with argv (no "vllm", "serve").

    The first positional argument is the model. Every "--flag [value]" and
    "--flag=value" is checked: known to the version, given the values its arity
    asks for (none for a switch), each of the right type or one of the choices,
    not given twice. vLLM's dotted keys of JSON flags ("--compilation-config.mode 3")
    are accepted unchecked. An empty list means the argv is clean.
    Raises ValueError for a version outside SUPPORTED_VERSIONS.
    """
    table = flag_table(version)
    problems: list[FlagProblem] = []
    positionals: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _looks_like_flag(token):
            positionals.append(token)
            continue
        i = _check_flag(token, argv, i, version, table, seen, problems)
    problems += _positional_problems(positionals)
    return problems


def _check_flag(
    token: str,
    argv: list[str],
    i: int,
    version: str,
    table: dict[str, FlagInfo],
    seen: set[str],
    problems: list[FlagProblem],
) -> int:
    """Check the flag ``token`` whose values start at ``argv[i]``; add its problems and
    the flag to ``seen``. Returns the index after the values it took."""
    flag, has_inline, inline = token.partition("=")
    if not flag.startswith("--"):
        problems.append(
            FlagProblem(flag, f"{flag}: write the long --form of this option")
        )
        # its value, so it is not reported as a stray positional
        return _skip_value(argv, i, has_inline)
    info, negated = _lookup(flag, table)
    if info is None and _json_key(flag, table) is not None:
        # one key of a JSON flag; vLLM merges the keys, so repeats are fine
        return _skip_value(argv, i, has_inline)
    if info is None:
        problems.append(FlagProblem(flag, _unknown_message(flag, version, table)))
        return _skip_value(argv, i, has_inline)
    if info.name in seen:
        problems.append(FlagProblem(flag, f"{flag} is given more than once; keep one"))
    seen.add(info.name)
    if negated or info.value_type == "bool-flag":
        if has_inline:
            problems.append(
                FlagProblem(
                    flag, f"{flag} is a switch and takes no value; drop '={inline}'"
                )
            )
        return i
    values, i = _take_values(info, argv, i, has_inline, inline)
    if not values:
        if not info.optional_value:
            problems.append(FlagProblem(flag, f"{flag} needs a value"))
        return i
    for value in values:
        problem = _value_problem(info, value)
        if problem is not None:
            problems.append(FlagProblem(flag, problem))
    return i


def _skip_value(argv: list[str], i: int, has_inline: str) -> int:
    """The index after a flag we do not check: past its one value, if it has one."""
    if not has_inline and i < len(argv) and not _looks_like_flag(argv[i]):
        i += 1
    return i


def _take_values(
    info: FlagInfo, argv: list[str], i: int, has_inline: str, inline: str
) -> tuple[list[str], int]:
    """The values a flag takes (the inline one, then one or, if multiple, every
    non-flag token) and the index after them."""
    values: list[str] = []
    if has_inline:
        values.append(inline)
    while (
        i < len(argv)
        and not _looks_like_flag(argv[i])
        and (not values or info.multiple)
    ):
        values.append(argv[i])
        i += 1
    return values, i


def _positional_problems(positionals: list[str]) -> list[FlagProblem]:
    """The model missing, or a positional argument after it."""
    problems: list[FlagProblem] = []
    if not positionals:
        problems.append(
            FlagProblem(
                "<model>",
                "no model: the first argument after 'vllm serve' is the model path",
            )
        )
    for extra in positionals[1:]:
        problems.append(
            FlagProblem(
                extra,
                f"unexpected argument {extra!r}: only the model is positional; "
                "is a --flag missing?",
            )
        )
    return problems
