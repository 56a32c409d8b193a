"""Simulated Ascend node state: the contract between the vLLM sim, the hardware sim and the agent.

A simulated node is a directory ``$SIM_STATE_DIR/<node>`` holding small JSON files:

- ``node.json``      static :class:`NodeConfig` (written by the agent/tests; defaults if absent)
- ``faults.json``    injected :class:`Faults` (written by :func:`inject_fault` / :func:`clear_faults`)
- ``engine.json``    what the simulated engine is doing (single writer: :class:`EngineReporter`)
- ``counters.json``  monotonic HCCS and RoCE counters (single writer: :class:`EngineReporter`)
- ``link_events.json`` RoCE link up/down history for ``hccn_tool -link_stat -g``

Every write is atomic (temp file + ``os.replace``); every read tolerates a missing or
half-written file and falls back to defaults, so readers never crash.

The package is split by what the files mean: :mod:`.store` (paths, atomic JSON I/O),
:mod:`.config` (``node.json``), :mod:`.faults` (``faults.json`` and fault injection),
:mod:`.link_events` (``link_events.json``) and :mod:`.engine` (``engine.json`` and
``counters.json``). Every name is re-exported here, so ``engine.sim.state.X`` keeps working.
"""

from __future__ import annotations

from engine.sim.state.config import (
    DEFAULT_SERVER_MODEL,
    DEFAULT_VERSIONS,
    NodeConfig,
    load_config,
    save_config,
)
from engine.sim.state.engine import (
    PHASES,
    EngineReporter,
    load_counters,
    read_engine,
)
from engine.sim.state.engine import _pid_alive as _pid_alive
from engine.sim.state.faults import (
    FAULT_FORMS,
    Faults,
    clear_faults,
    inject_fault,
    load_faults,
    save_faults,
)
from engine.sim.state.faults import _float_in as _float_in
from engine.sim.state.faults import _no_value as _no_value
from engine.sim.state.link_events import _append_link_event as _append_link_event
from engine.sim.state.link_events import load_link_events
from engine.sim.state.store import (
    COUNTERS_FILE,
    ENGINE_FILE,
    FAULTS_FILE,
    LINK_EVENTS_FILE,
    NODE_FILE,
    node_dir,
    read_json,
    write_json,
)
from engine.sim.state.store import _coerce as _coerce
from engine.sim.state.store import _num as _num

__all__ = [
    "COUNTERS_FILE",
    "DEFAULT_SERVER_MODEL",
    "DEFAULT_VERSIONS",
    "ENGINE_FILE",
    "FAULTS_FILE",
    "FAULT_FORMS",
    "LINK_EVENTS_FILE",
    "NODE_FILE",
    "PHASES",
    "EngineReporter",
    "Faults",
    "NodeConfig",
    "clear_faults",
    "inject_fault",
    "load_config",
    "load_counters",
    "load_faults",
    "load_link_events",
    "node_dir",
    "read_engine",
    "read_json",
    "save_config",
    "save_faults",
    "write_json",
]
