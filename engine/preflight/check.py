"""What every preflight check is made of: the pass / warn / fail statuses, the
``Check`` finding, and ``_tool``, the one way a check runs a node tool. Separate so
each subject's checks share them without importing one another."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.checktext import check as check_text
from engine.tools import ToolError, run_tool

PASS, WARN, FAIL = "pass", "warn", "fail"


@dataclass
class Check:
    """One preflight finding."""

    name: str
    status: str
    evidence: str
    fix: str = ""
    id: str = (
        ""  # engine/checktext.py: the console renders the reader's language from it
    )
    params: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Any] = field(default_factory=dict)  # params made of items

    @classmethod
    def of(cls, cid: str, status: str, **params: Any) -> Check:
        """The check ``cid`` of engine/checktext.py, its English filled with ``params``."""
        return cls(**check_text(cid, status, **params))

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        if not out["parts"]:
            del out["parts"]
        return out


def _tool(argv: list[str]) -> tuple[str | None, str]:
    """Run a tool; return (stdout, problem)."""
    try:
        result = run_tool(argv, timeout=15)
    except ToolError as exc:
        return None, str(exc)
    if not result.ok:
        return (
            None,
            f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[:200]}",
        )
    return result.stdout, ""
