"""Fake ``npu-smi`` for simulated nodes: prints the real 910B output formats.

Formats follow the real samples in shared/reference/ascend (98-column ``npu-smi info``
table, ``\\t%-30s : %s`` key/value types) and, where no capture exists (``-t hccs``), the
tool's source (hicann/driver npucli ``npu_info_print_ext.c``). Readings come from
:mod:`engine.sim.hardware` over the node directory ``$SIM_STATE_DIR/$SIM_NODE``.

``node`` holds the node snapshot, the errors and the key/value line; ``help`` the help
texts; ``table`` the whole-device views (the table, ``-l``, ``-m``, ``-t topo``);
``card`` the per-card ``-t`` types; ``hccs`` the HCCS types; ``cli`` the argv handling
(``run``, ``main``, ``info_main``).
"""

from __future__ import annotations

from engine.sim.npu_smi.card import (
    AICORE_COUNT,
    SUPPORTED_TYPES,
    TypeFn,
    t_board,
    t_common,
    t_health,
    t_memory,
    t_power,
    t_temp,
    t_usages,
)
from engine.sim.npu_smi.cli import (
    KNOWN_TYPES,
    info_main,
    main,
    run,
)
from engine.sim.npu_smi.hccs import (
    t_hccs,
    t_hccs_bw,
)
from engine.sim.npu_smi.help import (
    hccs_help,
    info_help,
    top_help,
)
from engine.sim.npu_smi.node import (
    EXIT_DCMI_INIT,
    EXIT_INNER_ERR,
    EXIT_INVALID_PARAMETER,
    EXIT_NOT_SUPPORT,
    Node,
    UsageError,
    kv,
    load_node,
)
from engine.sim.npu_smi.table import (
    CPU_AFFINITY,
    HEAD1,
    HEAD2,
    PROC_HEAD,
    RULE,
    SEP,
    TOP,
    render_list,
    render_mapping,
    render_table,
    render_topo,
)

__all__ = [
    "AICORE_COUNT",
    "CPU_AFFINITY",
    "EXIT_DCMI_INIT",
    "EXIT_INNER_ERR",
    "EXIT_INVALID_PARAMETER",
    "EXIT_NOT_SUPPORT",
    "HEAD1",
    "HEAD2",
    "KNOWN_TYPES",
    "PROC_HEAD",
    "RULE",
    "SEP",
    "SUPPORTED_TYPES",
    "TOP",
    "Node",
    "TypeFn",
    "UsageError",
    "hccs_help",
    "info_help",
    "info_main",
    "kv",
    "load_node",
    "main",
    "render_list",
    "render_mapping",
    "render_table",
    "render_topo",
    "run",
    "t_board",
    "t_common",
    "t_hccs",
    "t_hccs_bw",
    "t_health",
    "t_memory",
    "t_power",
    "t_temp",
    "t_usages",
    "top_help",
]
