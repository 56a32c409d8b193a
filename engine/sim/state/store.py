"""Where a simulated node's state lives on disk, and how it is written and read.

The file names, the node directory, the atomic JSON write and the forgiving JSON read,
plus the type-checking coercion the loaders use. Every other part of the state package
goes through these helpers, so they sit apart from what the files mean.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

NODE_FILE = "node.json"
FAULTS_FILE = "faults.json"
ENGINE_FILE = "engine.json"
COUNTERS_FILE = "counters.json"
LINK_EVENTS_FILE = "link_events.json"


def node_dir(node: str | None = None, base: str | Path | None = None) -> Path:
    """Return (and create) the state directory of a simulated node.

    ``base`` defaults to ``$SIM_STATE_DIR``, ``node`` to ``$SIM_NODE`` or ``$NODE_NAME``.
    Raises ValueError naming the missing variable when neither is given.
    """
    if base is None:
        base = os.environ.get("SIM_STATE_DIR")
        if not base:
            raise ValueError(
                "SIM_STATE_DIR is not set; point it at the simulator state directory"
            )
    if node is None:
        node = os.environ.get("SIM_NODE") or os.environ.get("NODE_NAME")
        if not node:
            raise ValueError(
                "SIM_NODE (or NODE_NAME) is not set; set it to the simulated node's name"
            )
    if not node or "/" in node or node in (".", ".."):
        raise ValueError(f"node name {node!r} is not a plain directory name")
    d = Path(base) / node
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON atomically (temp file in the same dir + os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object; a missing, unreadable or half-written file gives ``{}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _coerce(
    raw: dict[str, Any], defaults: dict[str, Any], optional_num: set[str]
) -> dict[str, Any]:
    """Keep keys of ``raw`` whose type matches the default's; others fall back."""
    out: dict[str, Any] = {}
    for key, default in defaults.items():
        if key not in raw:
            continue
        v = raw[key]
        if key in optional_num:
            if v is None or _num(v):
                out[key] = v
        elif isinstance(default, bool):
            if isinstance(v, bool):
                out[key] = v
        elif isinstance(default, float):
            if _num(v):
                out[key] = float(v)
        elif isinstance(default, int):
            if isinstance(v, int) and not isinstance(v, bool):
                out[key] = v
        elif isinstance(default, str) or default is None:
            if v is None or isinstance(v, str):
                out[key] = v
        elif isinstance(default, list):
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                out[key] = list(v)
        elif isinstance(default, dict):
            if isinstance(v, dict):
                out[key] = {str(k): str(x) for k, x in v.items()}
    return out
