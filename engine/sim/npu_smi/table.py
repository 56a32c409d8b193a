"""Whole-device views of the fake ``npu-smi``: ``info``, ``info -l``, ``info -m``, ``info -t topo``.

These print every NPU of the node at once and take no ``-i``/``-c``; the per-card
``-t`` types live in :mod:`engine.sim.npu_smi.card` and :mod:`engine.sim.npu_smi.hccs`.
"""

from __future__ import annotations

from engine.sim.npu_smi.node import Node, kv

SEP = "+===========================+===============+====================================================+"
RULE = "+---------------------------+---------------+----------------------------------------------------+"
TOP = "+" + "-" * 96 + "+"
HEAD1 = "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
HEAD2 = "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
PROC_HEAD = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"
CPU_AFFINITY = (
    "144-167",
    "144-167",
    "96-119",
    "96-119",
    "0-23",
    "0-23",
    "48-71",
    "48-71",
)


def _mem(used: int, total: int, width: int) -> str:
    return f"{used:<5}/ {total:<{width}}"  # a 5-digit used value runs into the slash, as on real output


def render_table(node: Node) -> str:
    """``npu-smi info``: the 98-column 910B table followed by the process table."""
    ver = node.cfg.versions["driver"]
    out = [TOP, f"| npu-smi {ver:<25}Version: {ver:<53}|", RULE, HEAD1, HEAD2, SEP]
    chips = node.chips
    for c in chips:
        out.append(
            f"| {c.npu_id:<6}{c.name:<20}| {c.health:<14}| {c.power_w:<12.1f}{c.temp_c:<18}{_mem(0, 0, 14)}|"
        )
        out.append(
            f"| {c.chip_id:<26}| {c.bus_id:<14}| {c.aicore_pct:<12}{_mem(0, 0, 11)}"
            f"{_mem(c.hbm_used_mb, c.hbm_total_mb, 14)}|"
        )
        out.append(SEP)
    out += [RULE, PROC_HEAD, SEP]
    for c in chips:
        if c.process_pid is None:
            out.append(f"| {'No running processes found in NPU ' + str(c.npu_id):<95}|")
        else:
            # containerised vLLM workers show an empty process name
            out.append(
                f"| {c.npu_id:<8}{c.chip_id:<18}| {c.process_pid:<14}| {'':<25}| {c.process_mem_mb:<24}|"
            )
        out.append(SEP)
    return "\n".join(out) + "\n"


def render_list(node: Node) -> str:
    """``npu-smi info -l``."""
    out = [kv("Total Count", node.cfg.npu_count)]
    for npu in range(node.cfg.npu_count):
        out += ["", kv("NPU ID", npu), kv("Chip Count", 1)]
    return "\n".join(out) + "\n"


def render_mapping(node: Node) -> str:
    """``npu-smi info -m`` (MCU rows keep their trailing spaces, like the real tool)."""
    out = [f"\t{'NPU ID':<30} {'Chip ID':<30} {'Chip Logic ID':<30} {'Chip Name':<30}"]
    for npu in range(node.cfg.npu_count):
        out.append(f"\t{npu:<30} {0:<30} {npu:<30} Ascend {node.cfg.npu_name}")
        out.append(f"\t{npu:<30} {1:<30} {'-':<30} {'Mcu':<30}")
    return "\n".join(out) + "\n"


def render_topo(node: Node) -> str:
    """``npu-smi info -t topo``: every 910B pair is HCCS on an 8-NPU A2 board."""
    n = node.cfg.npu_count
    out = ["\t   " + "".join(f"NPU{i:<8}" for i in range(n)) + "CPU Affinity"]
    for row in range(n):
        cells = "".join(f"{'X' if row == col else 'HCCS':<11}" for col in range(n))
        out.append(f"NPU{row:<8}{cells}{CPU_AFFINITY[row % len(CPU_AFFINITY)]}")
    out += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, UPI.",
        "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.",
        "  PIX  = Path traversing a single PCIe switch.",
        "  PXB  = Path traversing multiple PCIe switches.",
        "  HCCS = Connection traversing HCCS.",
        "  NA   = Unknown relationship.",
    ]
    return "\n".join(out) + "\n"
