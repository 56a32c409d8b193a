"""The one version parser: "0.11.1" -> (0, 11, 1), for comparing release numbers."""

from __future__ import annotations

import re


def version_key(version: str) -> tuple[int, ...]:
    """Up to three leading numbers; a suffix ("0.11.1rc2", "0.11.1+ascend") keeps its leading digits."""
    return tuple(
        int(m.group())
        for m in (re.match(r"\d+", part) for part in version.split(".")[:3])
        if m
    )
