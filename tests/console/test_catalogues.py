"""Every string the pages and scripts show has a zh-Hans translation (both catalogues).

Reads the msgids the way makemessages would (``{% translate %}``, ``{% blocktranslate %}``
with its placeholders, ``gettext``/``ngettext`` in static/console/js) and fails naming
each one the compiled zh_Hans catalogue does not translate. Operational content written
by workers is a separate matter (issue 21, point 2).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRANSLATE = re.compile(r"""\{%\s*translate\s+(?P<q>["'])(?P<s>.*?)(?P=q)""", re.S)
BLOCK = re.compile(
    r"\{%\s*blocktranslate(?P<opts>[^%]*)%\}(?P<body>.*?)\{%\s*endblocktranslate\s*%\}",
    re.S,
)
JS_CALL = re.compile(
    r"""\b(n?gettext)\(\s*(?P<q>["'])(?P<s>(?:\\.|(?!(?P=q)).)*)(?P=q)"""
)


def template_msgids() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        for m in TRANSLATE.finditer(text):
            out.append((str(path.relative_to(ROOT)), m.group("s")))
        for m in BLOCK.finditer(text):
            body = m.group("body").split("{% plural %}")[0]
            if "trimmed" in m.group("opts"):
                body = " ".join(body.split())
            out.append(
                (
                    str(path.relative_to(ROOT)),
                    re.sub(r"\{\{\s*(\w+)\s*\}\}", r"%(\1)s", body),
                )
            )
    return out


def script_msgids() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "static" / "console" / "js").glob("*.js")):
        for m in JS_CALL.finditer(path.read_text(encoding="utf-8")):
            raw = m.group("s")
            text = (
                ast.literal_eval('"' + raw.replace('"', '\\"') + '"')
                if "\\" in raw
                else raw
            )
            out.append((str(path.relative_to(ROOT)), text))
    return out


def translated(domain: str) -> set[str]:
    """msgids (singular) with a non-empty msgstr in the zh_Hans catalogue, fuzzy ones left out."""
    text = (ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / f"{domain}.po").read_text(
        encoding="utf-8"
    )
    done = set()
    for entry in text.split("\n\n"):
        if "#, fuzzy" in entry or "#~" in entry:
            continue
        fields: dict[str, str] = {}
        key = None
        for line in entry.splitlines():
            m = re.match(r'^(msgid|msgid_plural|msgstr(?:\[0\])?) "(.*)"$', line)
            if m:
                key = m.group(1)
                fields[key] = ast.literal_eval('"' + m.group(2) + '"')
            elif line.startswith('"') and key:
                fields[key] += ast.literal_eval(line)
        msgstr = fields.get("msgstr") or fields.get("msgstr[0]")
        if fields.get("msgid") and msgstr:
            done.add(fields["msgid"])
    return done


def found(msgid: str, catalog: set[str]) -> bool:
    # makemessages writes a literal % in a python-format msgid as %%
    return msgid in catalog or re.sub(r"%(?!\()", "%%", msgid) in catalog


def needs_translation(msgid: str) -> bool:
    return bool(re.search(r"[A-Za-z]{2,}", re.sub(r"%\(\w+\)s|%s", "", msgid)))


@pytest.mark.parametrize("source", ["templates", "scripts"])
def test_it_translates_every_ui_string_into_zh_hans(source: str) -> None:
    catalog = translated("django" if source == "templates" else "djangojs")
    strings = template_msgids() if source == "templates" else script_msgids()
    missing = [
        f"{where}: {msgid!r}"
        for where, msgid in strings
        if needs_translation(msgid) and not found(msgid, catalog)
    ]
    assert not missing, "untranslated in zh_Hans:\n" + "\n".join(sorted(set(missing)))
