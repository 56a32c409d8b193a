"""RoCE link up/down history (``link_events.json``) for ``hccn_tool -link_stat -g``.

Written when a roce-down fault is set or cleared; read by the fake ``hccn_tool``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.sim.state.store import LINK_EVENTS_FILE, _num, read_json, write_json


def _append_link_event(d: Path, event: str, now: float | None = None) -> None:
    events = load_link_events(d)
    events.append({"time": time.time() if now is None else now, "event": event})
    write_json(
        d / LINK_EVENTS_FILE, {"events": events[-50:]}
    )  # the real tool keeps a short history


def load_link_events(d: Path) -> list[dict[str, Any]]:
    """RoCE link events oldest first: ``[{"time": epoch, "event": "LINK UP"|"LINK DOWN"}]``."""
    raw = read_json(d / LINK_EVENTS_FILE).get("events")
    if not isinstance(raw, list):
        return []
    return [
        {"time": float(e["time"]), "event": e["event"]}
        for e in raw
        if isinstance(e, dict)
        and _num(e.get("time"))
        and e.get("event") in ("LINK UP", "LINK DOWN")
    ]
