"""What the simulated engine is doing (``engine.json``) and the counters it drives
(``counters.json``): :class:`EngineReporter`, the single writer of both, and its readers.

Separate because these files change every report while the engine runs, whereas the
config and faults change only when someone sets them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from engine.links import LINK_MODES
from engine.sim.state.config import load_config
from engine.sim.state.faults import load_faults
from engine.sim.state.store import (
    COUNTERS_FILE,
    ENGINE_FILE,
    _num,
    read_json,
    write_json,
)

PHASES = ("loading", "waiting_for_ranks", "ready", "dead")


def load_counters(d: Path) -> dict[str, Any]:
    """Read ``counters.json``: ``{"updated_at", "hccs": {npu: {tx,rx,retry,crc: [7 ints]}}, "roce": {npu: {key: int}}}``.

    Missing parts are absent; use :func:`engine.sim.hardware.counters_for` for filled-in values.
    """
    return read_json(d / COUNTERS_FILE)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EngineReporter:
    """Writer of ``engine.json`` and ``counters.json`` for one running vLLM sim process."""

    def __init__(
        self, d: Path, *, pid: int, rank: int, role: str, link_mode: str
    ) -> None:
        if link_mode not in LINK_MODES:
            raise ValueError(
                f"link_mode {link_mode!r} is not allowed; use one of {', '.join(LINK_MODES)}"
            )
        self.d = d
        self.pid = pid
        self.rank = rank
        self.role = role
        self.link_mode = link_mode
        self._last: float | None = (
            None  # time of the previous report; counters integrate from here
        )

    def report(
        self, *, phase: str, load: float, hbm_used_mb: int, now: float | None = None
    ) -> None:
        """Publish the engine state and integrate counters over the time since the last report.

        ``phase`` is one of loading|waiting_for_ranks|ready|dead; ``load`` is clamped to 0..1.
        ``now`` (epoch seconds) is for tests; defaults to ``time.time()``.
        """
        from engine.sim import hardware  # late import: hardware builds on this module

        if phase not in PHASES:
            raise ValueError(
                f"phase {phase!r} is not allowed; use one of {', '.join(PHASES)}"
            )
        t = time.time() if now is None else now
        load = min(1.0, max(0.0, float(load)))
        if self._last is not None and phase == "ready":
            dt = min(max(0.0, t - self._last), hardware.MAX_STEP_S)
            counters = hardware.advance_counters(
                load_counters(self.d),
                cfg=load_config(self.d),
                faults=load_faults(self.d),
                link_mode=self.link_mode,
                load=load,
                dt=dt,
            )
            counters["updated_at"] = t
            write_json(self.d / COUNTERS_FILE, counters)
        self._last = t
        write_json(
            self.d / ENGINE_FILE,
            {
                "pid": self.pid,
                "rank": self.rank,
                "role": self.role,
                "phase": phase,
                "link_mode": self.link_mode,
                "load": load,
                "hbm_used_mb": int(hbm_used_mb),
                "updated_at": t,
            },
        )

    def close(self) -> None:
        """Mark the engine stopped; its HBM is released."""
        write_json(
            self.d / ENGINE_FILE,
            {
                "phase": "stopped",
                "pid": self.pid,
                "rank": self.rank,
                "role": self.role,
                "link_mode": self.link_mode,
                "load": 0.0,
                "hbm_used_mb": 0,
                "updated_at": time.time(),
            },
        )


def read_engine(d: Path) -> dict[str, Any]:
    """Return the engine state dict, or ``{"phase": "stopped"}``.

    Keys: pid, rank, role, phase, link_mode, load, hbm_used_mb, updated_at. A missing or
    broken file, a "stopped" phase, or a pid that no longer exists all read as stopped.
    """
    raw = read_json(d / ENGINE_FILE)
    pid = raw.get("pid")
    if (
        raw.get("phase") not in PHASES
        or not isinstance(pid, int)
        or isinstance(pid, bool)
    ):
        return {"phase": "stopped"}
    if not _pid_alive(pid):  # engine killed without close(): its HBM is free again
        return {"phase": "stopped"}
    return {
        "pid": pid,
        "rank": raw.get("rank") if isinstance(raw.get("rank"), int) else 0,
        "role": raw.get("role") if isinstance(raw.get("role"), str) else "",
        "phase": raw["phase"],
        "link_mode": raw.get("link_mode")
        if raw.get("link_mode") in LINK_MODES
        else "hccs",
        "load": float(raw["load"]) if _num(raw.get("load")) else 0.0,
        "hbm_used_mb": int(raw["hbm_used_mb"]) if _num(raw.get("hbm_used_mb")) else 0,
        "updated_at": float(raw["updated_at"]) if _num(raw.get("updated_at")) else 0.0,
    }
