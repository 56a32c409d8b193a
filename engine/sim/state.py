"""Simulated Ascend node state: the contract between the vLLM sim, the hardware sim and the agent.

A simulated node is a directory ``$SIM_STATE_DIR/<node>`` holding small JSON files:

- ``node.json``      static :class:`NodeConfig` (written by the agent/tests; defaults if absent)
- ``faults.json``    injected :class:`Faults` (written by :func:`inject_fault` / :func:`clear_faults`)
- ``engine.json``    what the simulated engine is doing (single writer: :class:`EngineReporter`)
- ``counters.json``  monotonic HCCS and RoCE counters (single writer: :class:`EngineReporter`)
- ``link_events.json`` RoCE link up/down history for ``hccn_tool -link_stat -g``

Every write is atomic (temp file + ``os.replace``); every read tolerates a missing or
half-written file and falls back to defaults, so readers never crash.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capabilities import HONOURED, capability
from engine.links import LINK_MODES

NODE_FILE = "node.json"
FAULTS_FILE = "faults.json"
ENGINE_FILE = "engine.json"
COUNTERS_FILE = "counters.json"
LINK_EVENTS_FILE = "link_events.json"

PHASES = ("loading", "waiting_for_ranks", "ready", "dead")

DEFAULT_VERSIONS: dict[str, str] = {
    "driver": "25.2.0",
    "firmware": "7.7.0.1.231",
    "cann": "9.1.0",
    "vllm": "0.23.0",
    "vllm_ascend": "0.23.0",
    "torch_npu": "2.10.0.post4",
}

# Allowed fault forms, used verbatim in ValueError messages.
FAULT_FORMS: dict[str, str] = {
    "hccs-loss": "hccs-loss PCT (0-100)",
    "roce-down": "roce-down (no value)",
    "overtemp": "overtemp CELSIUS (0-150)",
    "npu-warning": "npu-warning (no value)",
    "hbm-pressure": "hbm-pressure PCT (0-100)",
    "crash": "crash once|always",
    "slow-start": "slow-start SECONDS (0-3600)",
    "agent-stop": "agent-stop (no value)",
    "hccs-unsupported": "hccs-unsupported (no value)",
    "garbled": "garbled (no value)",
}

# The demo's servers (engine/capabilities.py key). Whether the hardware honours
# HCCL_INTRA_ROCE_ENABLE follows that model's capability entry.
DEFAULT_SERVER_MODEL = "atlas-800t-a2"


@dataclass
class NodeConfig:
    """Static description of a simulated node (``node.json``)."""

    name: str
    npu_count: int = 8
    npu_name: str = "910B3"
    hbm_total_mb: int = 65536
    npu_ips: list[str] = field(
        default_factory=list
    )  # sim only: loopback range, e.g. 127.10.1.1..8
    versions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_VERSIONS))
    server_model: str = DEFAULT_SERVER_MODEL  # capability key, e.g. atlas-200t-a2-box16
    # None = as the server model's capability entry says; a bool forces it (tests)
    honours_roce_switch: bool | None = None

    def honours_switch(self) -> bool:
        """Does this node's HCCL move intra-server traffic to RoCE when asked?"""
        if self.honours_roce_switch is not None:
            return self.honours_roce_switch

        return capability(self.server_model).roce_switch == HONOURED

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Faults:
    """Injected faults (``faults.json``)."""

    hccs_loss_pct: float = 0.0
    roce_down: bool = False
    overtemp_c: float | None = None
    npu_warning: bool = False
    hbm_pressure_pct: float | None = None
    crash: str | None = None  # "once" | "always"
    slow_start_s: float = 0.0
    agent_stop: bool = False
    # npu-smi answers -t hccs / -t hccs-bw like a driver without them
    hccs_unsupported: bool = False
    garbled: bool = False  # the engine answers junk/loops (engine/sim/vllm/answers.py)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def active(self) -> list[str]:
        """Names (inject_fault form) of the faults that are set."""
        names = []
        if self.hccs_loss_pct > 0:
            names.append("hccs-loss")
        if self.roce_down:
            names.append("roce-down")
        if self.overtemp_c is not None:
            names.append("overtemp")
        if self.npu_warning:
            names.append("npu-warning")
        if self.hbm_pressure_pct is not None:
            names.append("hbm-pressure")
        if self.crash is not None:
            names.append("crash")
        if self.slow_start_s > 0:
            names.append("slow-start")
        if self.agent_stop:
            names.append("agent-stop")
        if self.hccs_unsupported:
            names.append("hccs-unsupported")
        if self.garbled:
            names.append("garbled")
        return names


# ---------------------------------------------------------------- file helpers


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


# ---------------------------------------------------------------- config and faults


def load_config(d: Path) -> NodeConfig:
    """Read ``node.json``; missing/invalid fields take defaults (name defaults to the dir name)."""
    raw = read_json(d / NODE_FILE)
    cfg = NodeConfig(name=d.name)
    fields = _coerce(raw, cfg.to_dict(), set())
    cfg = dataclasses.replace(cfg, **fields)
    # an optional bool: _coerce keeps only str/None for a None default
    honours = raw.get("honours_roce_switch")
    cfg.honours_roce_switch = honours if isinstance(honours, bool) else None
    if cfg.npu_count < 1:
        cfg.npu_count = 8
    versions = dict(DEFAULT_VERSIONS)
    versions.update(cfg.versions)
    cfg.versions = versions
    return cfg


def save_config(d: Path, cfg: NodeConfig) -> None:
    """Write ``node.json`` atomically."""
    write_json(d / NODE_FILE, cfg.to_dict())


def load_faults(d: Path) -> Faults:
    """Read ``faults.json``; missing/invalid fields take defaults (no fault)."""
    raw = read_json(d / FAULTS_FILE)
    fields = _coerce(raw, Faults().to_dict(), {"overtemp_c", "hbm_pressure_pct"})
    f = Faults(**fields)
    if f.crash not in (None, "once", "always"):
        f.crash = None
    return f


def save_faults(d: Path, f: Faults) -> None:
    """Write ``faults.json`` atomically; a change of ``roce_down`` records a link event."""
    before = load_faults(d)
    write_json(d / FAULTS_FILE, f.to_dict())
    if before.roce_down != f.roce_down:
        _append_link_event(d, "LINK DOWN" if f.roce_down else "LINK UP")


def _float_in(fault: str, value: str | None, lo: float, hi: float) -> float:
    form = FAULT_FORMS[fault]
    if value is None or value.strip() == "":
        raise ValueError(f"fault {fault} needs a value: use '{form}'")
    try:
        x = float(value)
    except ValueError:
        raise ValueError(
            f"fault {fault}: {value!r} is not a number; use '{form}'"
        ) from None
    if not (lo <= x <= hi) or x != x:
        raise ValueError(f"fault {fault}: {value} is out of range; use '{form}'")
    return x


def _no_value(fault: str, value: str | None) -> None:
    if value is not None and value.strip() != "":
        raise ValueError(
            f"fault {fault} takes no value (got {value!r}); use '{FAULT_FORMS[fault]}'"
        )


def inject_fault(d: Path, fault: str, value: str | None) -> Faults:
    """Set one fault on the node and return the resulting :class:`Faults`.

    Raises ValueError naming the fault and its allowed form on a bad name or value;
    nothing is written in that case.
    """
    f = load_faults(d)
    if fault == "hccs-loss":
        f.hccs_loss_pct = _float_in(fault, value, 0.0, 100.0)
    elif fault == "roce-down":
        _no_value(fault, value)
        f.roce_down = True
    elif fault == "overtemp":
        f.overtemp_c = _float_in(fault, value, 0.0, 150.0)
    elif fault == "npu-warning":
        _no_value(fault, value)
        f.npu_warning = True
    elif fault == "hbm-pressure":
        f.hbm_pressure_pct = _float_in(fault, value, 0.0, 100.0)
    elif fault == "crash":
        if value is None:  # a bare `sim inject NODE crash` (the demo's) crashes once
            value = "once"
        if value not in ("once", "always"):
            raise ValueError(
                f"fault crash: value {value!r} is not allowed; use '{FAULT_FORMS['crash']}'"
            )
        f.crash = value
    elif fault == "slow-start":
        f.slow_start_s = _float_in(fault, value, 0.0, 3600.0)
    elif fault == "agent-stop":
        _no_value(fault, value)
        f.agent_stop = True
    elif fault == "hccs-unsupported":
        _no_value(fault, value)
        f.hccs_unsupported = True
    elif fault == "garbled":
        _no_value(fault, value)
        f.garbled = True
    else:
        allowed = ", ".join(FAULT_FORMS.values())
        raise ValueError(f"unknown fault {fault!r}; allowed: {allowed}")
    save_faults(d, f)
    return f


def clear_faults(d: Path) -> None:
    """Remove every injected fault (a cleared roce-down records LINK UP)."""
    save_faults(d, Faults())


# ---------------------------------------------------------------- link history


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


# ---------------------------------------------------------------- counters


def load_counters(d: Path) -> dict[str, Any]:
    """Read ``counters.json``: ``{"updated_at", "hccs": {npu: {tx,rx,retry,crc: [7 ints]}}, "roce": {npu: {key: int}}}``.

    Missing parts are absent; use :func:`engine.sim.hardware.counters_for` for filled-in values.
    """
    return read_json(d / COUNTERS_FILE)


# ---------------------------------------------------------------- engine


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
