"""``--format`` for the fake ``docker``: the Go-template subset and the option that carries it.

Used by ``inspect``, ``image inspect`` and ``version``; an unsupported template
raises rather than printing something docker would not.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.sim.docker_cli.errors import CliError, flag_value


def _lookup(obj: Any, path: str) -> Any:
    for part in [p for p in path.split(".") if p]:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def render_format(fmt: str, obj: dict[str, Any]) -> str:
    """Go-template subset: ``{{.A.B}}`` and ``{{json .A.B}}``."""

    def one(m: re.Match[str]) -> str:
        fn, path = (m.group(1) or "").strip(), m.group(2)
        value = _lookup(obj, path)
        if fn == "json":
            return json.dumps(value, separators=(",", ":"))
        return "" if value is None else str(value)

    out = re.sub(r"\{\{\s*(json\s+)?(\.[\w.]*)\s*\}\}", one, fmt)
    if "{{" in out:
        raise CliError(f"template: unsupported in the simulator: {fmt!r}")
    return out


def _format_arg(args: list[str]) -> tuple[str, list[str]]:
    fmt, rest, i = "", [], 0
    while i < len(args):
        if args[i] in ("--format", "-f"):
            fmt, i = flag_value(args, i), i + 2
        elif args[i].startswith("--format="):
            fmt, i = args[i].split("=", 1)[1], i + 1
        elif args[i] == "--type":
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return fmt, rest
