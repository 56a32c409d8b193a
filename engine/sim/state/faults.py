"""Fault injection (``faults.json``): :class:`Faults`, its load/save, and the
``inject_fault`` / ``clear_faults`` entry points with their value checks.

Separate because it is the only part of the state that operators change at run time,
and its error messages (``FAULT_FORMS``) are a contract with the CLI and the agent.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sim.state.link_events import _append_link_event
from engine.sim.state.store import FAULTS_FILE, _coerce, read_json, write_json

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
