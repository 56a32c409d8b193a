"""The model directory a node will serve from: confined to the models root, and its
manifest (engine/weights.py) that the control side compares across nodes."""

from __future__ import annotations

import os
from typing import Any

from engine import weights
from engine.checktext import check as check_text
from engine.drivers import node_driver
from engine.preflight.check import FAIL, WARN, Check

DEFAULT_MODELS_ROOT = "/data/models"


def models_root() -> str:
    """The directory every model must sit under (AGENT_MODELS_ROOT), resolved."""
    return os.path.realpath(os.environ.get("AGENT_MODELS_ROOT") or DEFAULT_MODELS_ROOT)


def outside_models_root(path: str) -> str | None:
    """Why ``path`` may not be walked, or None: it must resolve (symlinks, "..") to a
    directory strictly below the models root, so a message naming ``/`` or ``/etc``
    cannot make the agent read the whole disk."""
    refused = _outside_models_root(path)
    if refused is None:
        return None
    cid, status, shown, root = refused
    return Check.of(cid, status, path=shown, root=root).evidence


def _outside_models_root(path: str) -> tuple[str, str, str, str] | None:
    """(check id, status, path, root) when ``path`` is refused, else None."""
    root = models_root()
    real = os.path.realpath(path)
    if not os.path.isabs(path):
        return ("model_path.relative", FAIL, repr(path), root)
    if real == root or os.path.commonpath([root, real]) != root or real == "/":
        return ("model_path.outside", FAIL, path, root)
    return None


def check_model(path: str) -> tuple[Check, int | None, dict[str, Any] | None]:
    """The model directory: its manifest (engine/weights.py), which the control side
    compares across nodes file by file, and its total size."""
    if not path:
        return Check.of("model_path.none", WARN), None, None
    refused = _outside_models_root(path)
    if refused:
        cid, status, shown, root = refused
        return Check.of(cid, status, path=shown, root=root), None, None
    found = weights.manifest(node_driver().model_dir(path))
    found["path"] = path  # as the plan names it, not where a sim node keeps it
    result = weights.check(found)
    if not found["exists"]:
        result = check_text("model_files.missing", FAIL, path=path)
    return Check(**result), (found["total_bytes"] if found["exists"] else None), found
